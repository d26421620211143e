/** Request cost from @pydantic/genai-prices' bundled price data: a maintained library, never our own table. */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type * as GenaiPrices from '@pydantic/genai-prices';
import type { Provider as PriceProvider } from '@pydantic/genai-prices';
import type { Provider } from '../types.js';
import { PROVIDERS } from '../providers/index.js';
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
 * of a call); the price data and arithmetic stay the library's. Bounded: cleared when full.
 */
const matches = new Map<string, PriceProvider | null>();
const MATCHES_MAX = 1000;

function findPriceProvider(provider: Provider, model: string): PriceProvider | null {
  const key = `${provider}\u0000${model}`;
  const cached = matches.get(key);
  if (cached !== undefined) return cached;
  const probe = calcPrice({ input_tokens: 0, output_tokens: 0 }, model, {
    providerId: PROVIDERS[provider].priceProviderId,
  });
  const found = probe ? { ...probe.provider, models: [probe.model] } : null;
  if (matches.size >= MATCHES_MAX) matches.clear();
  matches.set(key, found);
  return found;
}

export function computeCost(
  provider: Provider,
  model: string | null,
  usage: Usage,
): { cost_usd: number | null; price_source: string | null } {
  const none = { cost_usd: null, price_source: null };
  if (!model || usage.input_tokens === null || usage.output_tokens === null) return none;
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
  if (cacheRead + cacheWrite > usage.input_tokens) return none; // inconsistent figures: no guess
  const audio = audioUsage(usage);
  if (audio === undefined) return none;
  Object.assign(priced, audio);
  try {
    const priceProvider = findPriceProvider(provider, model);
    if (!priceProvider) return none;
    // Audio priced at the text rate would be wrong by ~10x: without an audio price there is no cost.
    if (audio && !hasAudioPrices(priceProvider, audio)) return none;
    const result = calcPrice(priced, model, { provider: priceProvider });
    return result ? { cost_usd: result.total_price, price_source: PRICE_SOURCE } : none;
  } catch {
    return none; // malformed price data must not fail a request
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

const AUDIO_PRICE_FIELD = {
  input_audio_tokens: 'input_audio_mtok',
  cache_audio_read_tokens: 'cache_audio_read_mtok',
  output_audio_tokens: 'output_audio_mtok',
} as const;

function hasAudioPrices(provider: PriceProvider, audio: AudioPriced): boolean {
  const prices = provider.models[0]?.prices as
    Record<string, unknown> | Record<string, unknown>[] | undefined;
  // Conditional price lists (by date or size) name the same fields in every entry; the first one tells.
  const entry = Array.isArray(prices)
    ? (prices[0] as { prices?: Record<string, unknown> } | undefined)?.prices
    : prices;
  if (!entry) return false;
  return (Object.keys(audio) as (keyof AudioPriced)[]).every((k) => entry[AUDIO_PRICE_FIELD[k]] != null);
}
