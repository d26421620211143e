/** Request cost from @pydantic/genai-prices' bundled price data: a maintained library, never our own table. */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type * as GenaiPrices from '@pydantic/genai-prices';
import type { Provider as PriceProvider } from '@pydantic/genai-prices';
import type { Provider } from '../types.js';
import { PROVIDERS } from '../providers/index.js';
import { flatPlan, flatPrice, type FlatPlan } from './flat-price.js';
import type { Usage } from './types.js';

const require = createRequire(import.meta.url);
// The package's CommonJS build: the same code and price data, minified. Its source stays in every
// instance's heap for as long as it runs, 1.3 MB less than the ESM build's.
const { calcPrice } = require('@pydantic/genai-prices') as typeof GenaiPrices;

function readLibraryVersion(): string {
  try {
    // The package exports no ./package.json; find it beside its entry point.
    const entry = require.resolve('@pydantic/genai-prices');
    const pkg = JSON.parse(readFileSync(join(dirname(entry), '..', 'package.json'), 'utf8')) as {
      version?: unknown;
    };
    return typeof pkg.version === 'string' ? pkg.version : 'unknown';
  } catch {
    return 'unknown';
  }
}

/** The library version pins its bundled price snapshot; we never auto-update it at run time. */
export const PRICE_SOURCE = `genai-prices@${readLibraryVersion()}`;

/**
 * Per (provider, model): the library's provider entry cut down to the one matching model, or null when it
 * knows no such model. Pricing against the cut-down entry skips matching over every model (half the cost
 * of a call); the price data stays the library's. A flat-priced model also gets a plan to price it
 * without the library's per-call copying and validation (flat-price.ts, the same arithmetic). Bounded:
 * cleared when full.
 */
const matches = new Map<string, { provider: PriceProvider; plan: FlatPlan | null } | null>();
const MATCHES_MAX = 1000;

function findPrice(
  provider: Provider,
  model: string,
): { provider: PriceProvider; plan: FlatPlan | null } | null {
  const key = `${provider}\u0000${model}`;
  const cached = matches.get(key);
  if (cached !== undefined) return cached;
  const probe = calcPrice({ input_tokens: 0, output_tokens: 0 }, model, {
    providerId: PROVIDERS[provider].priceProviderId,
  });
  const found = probe
    ? {
        provider: { ...probe.provider, models: [probe.model] },
        // Groq's whisper models get the library's own duration rule; ours are OpenAI's and Anthropic's.
        plan: probe.provider.id === 'groq' ? null : flatPlan(probe.model),
      }
    : null;
  if (matches.size >= MATCHES_MAX) matches.clear();
  matches.set(key, found);
  return found;
}

function findPriceProvider(provider: Provider, model: string): PriceProvider | null {
  return findPrice(provider, model)?.provider ?? null;
}

/** How a cost was not found, as the row's price_source says it: shown as "unpriced", never as $0. */
export function unpriced(reason: string): { cost_usd: null; price_source: string } {
  return { cost_usd: null, price_source: `unpriced: ${reason}` };
}

export function computeCost(
  provider: Provider,
  model: string | null,
  usage: Usage,
): { cost_usd: number | null; price_source: string | null } {
  if (!model) return unpriced('no model named');
  if (usage.input_tokens === null && usage.input_audio_seconds !== undefined)
    return durationCost(provider, model, usage.input_audio_seconds);
  if (usage.input_tokens === null || usage.output_tokens === null)
    return unpriced('the response reported no usage');
  // The library wants input_tokens as the total (uncached + cache reads + cache writes), like our Usage.
  const priced: Record<string, number> = {
    input_tokens: usage.input_tokens,
    output_tokens: usage.output_tokens,
  };
  const cacheRead = usage.cache_read_tokens ?? 0;
  const cacheWrite = usage.cache_write_tokens ?? 0;
  if (cacheRead > 0) priced.cache_read_tokens = cacheRead;
  if (cacheWrite > 0) priced.cache_write_tokens = cacheWrite;
  // The library prices this subset at the model's 1-hour write rate, the rest of the writes at the 5-minute one.
  if ((usage.cache_write_1h_tokens ?? 0) > 0) priced.cache_write_1h_tokens = usage.cache_write_1h_tokens!;
  if (cacheRead + cacheWrite > usage.input_tokens) return unpriced('inconsistent token counts');
  const audio = audioUsage(usage);
  if (audio === undefined) return unpriced('inconsistent token counts');
  Object.assign(priced, audio);
  const image = usage.input_image_tokens ?? 0;
  if (image > usage.input_tokens) return unpriced('inconsistent token counts');
  if (image > 0) priced.input_image_tokens = image;
  try {
    const found = findPrice(provider, model);
    if (!found) return unpriced(`${PRICE_SOURCE} has no price for ${model}`);
    const priceProvider = found.provider;
    // Audio or image tokens priced at the text rate would be wrong by ~10x: without their price, no cost.
    if (audio && !hasPrices(priceProvider, audio))
      return unpriced(`${PRICE_SOURCE} has no audio price for ${model}`);
    if (image > 0 && !hasPrices(priceProvider, { input_image_tokens: image }))
      return unpriced(`${PRICE_SOURCE} has no image price for ${model}`);
    const flat = found.plan ? flatPrice(found.plan, priced) : undefined;
    if (flat !== undefined) return { cost_usd: flat, price_source: PRICE_SOURCE };
    const result = calcPrice(priced, model, { provider: priceProvider });
    return result
      ? { cost_usd: result.total_price, price_source: PRICE_SOURCE }
      : unpriced(`${PRICE_SOURCE} has no price for ${model}`);
  } catch {
    return unpriced('the price data could not be read'); // malformed price data must not fail a request
  }
}

/**
 * Models billed by the length of their input audio (whisper-1). The library holds their rate
 * (`input_audio_hours`) but its calculation does not apply it, so the rate is read from its data here.
 */
function durationCost(
  provider: Provider,
  model: string,
  seconds: number,
): { cost_usd: number | null; price_source: string } {
  try {
    const priceProvider = findPriceProvider(provider, model);
    const rate = priceEntry(priceProvider)?.input_audio_hours;
    if (typeof rate !== 'number') return unpriced(`${PRICE_SOURCE} has no per-hour audio price for ${model}`);
    return { cost_usd: (seconds / 3600) * rate, price_source: `${PRICE_SOURCE} input_audio_hours` };
  } catch {
    return unpriced('the price data could not be read');
  }
}

type AudioPriced = Partial<
  Record<'input_audio_tokens' | 'cache_audio_read_tokens' | 'output_audio_tokens', number>
>;

/** The library's audio fields for this usage, null when it has none, undefined when inconsistent. */
function audioUsage(usage: Usage): AudioPriced | null | undefined {
  const input = usage.input_audio_tokens ?? 0;
  const cached = usage.cache_read_audio_tokens ?? 0;
  const output = usage.output_audio_tokens ?? 0;
  if (input + cached + output === 0) return null;
  if (input > usage.input_tokens! || output > usage.output_tokens! || cached > (usage.cache_read_tokens ?? 0))
    return undefined;
  const out: AudioPriced = {};
  if (input > 0) out.input_audio_tokens = input;
  if (cached > 0) out.cache_audio_read_tokens = cached;
  if (output > 0) out.output_audio_tokens = output;
  return out;
}

const PRICE_FIELD: Record<string, string> = {
  input_audio_tokens: 'input_audio_mtok',
  cache_audio_read_tokens: 'cache_audio_read_mtok',
  output_audio_tokens: 'output_audio_mtok',
  input_image_tokens: 'input_image_mtok',
};

/** The matched model's prices (the first entry of a conditional list, which names the same fields). */
function priceEntry(provider: PriceProvider | null): Record<string, unknown> | undefined {
  const prices = provider?.models[0]?.prices as
    Record<string, unknown> | Record<string, unknown>[] | undefined;
  return Array.isArray(prices)
    ? (prices[0] as { prices?: Record<string, unknown> } | undefined)?.prices
    : prices;
}

function hasPrices(provider: PriceProvider, fields: Record<string, number>): boolean {
  const entry = priceEntry(provider);
  if (!entry) return false;
  return Object.keys(fields).every((k) => entry[PRICE_FIELD[k]!] != null);
}

/**
 * A batch line's cost: the library's batch price for the model where it has one (a `<model>:batch` entry),
 * else the standard price times the provider's documented batch discount, said in price_source.
 */
export function computeBatchCost(
  provider: Provider,
  model: string | null,
  usage: Usage,
  discount: { factor: number; documented: string },
): { cost_usd: number | null; price_source: string | null } {
  if (model) {
    try {
      const batchModel = `${model}:batch`;
      // A batch entry must be the model's own (`…:batch`), not a looser match of the longer name.
      const probe = findPriceProvider(provider, batchModel);
      if (probe?.models[0]?.id.endsWith(':batch')) {
        const priced = computeCost(provider, batchModel, usage);
        if (priced.cost_usd !== null) return { ...priced, price_source: `${PRICE_SOURCE} batch price` };
      }
    } catch {
      // no batch entry: the discount below
    }
  }
  const standard = computeCost(provider, model, usage);
  if (standard.cost_usd === null) return standard;
  return {
    cost_usd: standard.cost_usd * discount.factor,
    price_source: `${PRICE_SOURCE} × ${discount.factor} batch discount (${discount.documented})`,
  };
}
