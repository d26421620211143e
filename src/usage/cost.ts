/** Request cost from @pydantic/genai-prices' bundled price data: a maintained library, never our own table. */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type * as GenaiPrices from '@pydantic/genai-prices';
import type { Provider as PriceProvider } from '@pydantic/genai-prices';
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
 * Per (price provider, model): the library's provider entry cut down to the one matching model, or null when it
 * knows no such model. Pricing against the cut-down entry skips matching over every model (half the cost
 * of a call); the price data stays the library's. A flat-priced model also gets a plan to price it
 * without the library's per-call copying and validation (flat-price.ts, the same arithmetic). Bounded:
 * cleared when full.
 */
const matches = new Map<string, { provider: PriceProvider; plan: FlatPlan | null } | null>();
const MATCHES_MAX = 1000;

function findPrice(
  providerId: string,
  model: string,
): { provider: PriceProvider; plan: FlatPlan | null } | null {
  const key = `${providerId}\u0000${model}`;
  const cached = matches.get(key);
  if (cached !== undefined) return cached;
  const probe = calcPrice({ input_tokens: 0, output_tokens: 0 }, model, { providerId });
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

function findPriceProvider(providerId: string, model: string): PriceProvider | null {
  return findPrice(providerId, model)?.provider ?? null;
}

/** How a cost was not found, as the row's price_source says it: shown as "unpriced", never as $0. */
export function unpriced(reason: string): { cost_usd: null; price_source: string } {
  return { cost_usd: null, price_source: `unpriced: ${reason}` };
}

/**
 * Tool fees the library prices, by its usage key, with the price key that holds the rate. A model whose
 * entry lacks the rate leaves the fee out of the library's total without a word: checked after pricing.
 */
const LIBRARY_TOOL_PRICES: Readonly<Record<string, string>> = {
  web_searches: 'web_searches_kcount',
  storage_searches: 'storage_searches_kcount',
};

/** Rows whose cost leaves out a fee the library cannot price start their price_source with this. */
export const PARTIAL = 'partial';

/** The fees a partial price_source names, with their counts ([] for any other price_source). */
export function missingFees(priceSource: string): Array<[string, number]> {
  if (!priceSource.startsWith(`${PARTIAL}: `)) return [];
  const list = / has no price for (.+?) on /.exec(priceSource)?.[1] ?? '';
  return list.split(', ').flatMap((part) => {
    const m = /^(\S+) ×(\d+)$/.exec(part);
    return m ? [[m[1]!, Number(m[2])] as [string, number]] : [];
  });
}

/** A provider's tool fees it documents as free (fee → where it says so): counted, never "missing". */
export type FreeToolFees = Readonly<Record<string, string>>;

/**
 * `providerId`: genai-prices' id of the provider whose models these are (ProviderModule.priceProviderId).
 * A tool fee the library has no rate for makes the cost partial: the rest is priced and price_source names
 * each missing fee with its count, so it is never read as the whole bill.
 */
export function priceUsage(
  providerId: string,
  model: string | null,
  usage: Usage,
  freeFees: FreeToolFees = {},
): { cost_usd: number | null; price_source: string | null } {
  if (!model) return unpriced('no model named');
  if (usage.input_tokens === null && usage.input_audio_seconds !== undefined)
    return durationCost(providerId, model, usage.input_audio_seconds);
  const lib = libraryUsage(usage, freeFees);
  if (typeof lib === 'string') return unpriced(lib);
  const { priced, audio, image, libraryFees } = lib;
  const missing = lib.missing.map(([fee, count]) => `${fee} ×${count}`);
  try {
    const found = findPrice(providerId, model);
    if (!found) return unpriced(`${PRICE_SOURCE} has no price for ${model}`);
    const priceProvider = found.provider;
    // Audio or image tokens priced at the text rate would be wrong by ~10x: without their price, no cost.
    if (audio && !hasPrices(priceProvider, audio))
      return unpriced(`${PRICE_SOURCE} has no audio price for ${model}`);
    if (image > 0 && !hasPrices(priceProvider, { input_image_tokens: image }))
      return unpriced(`${PRICE_SOURCE} has no image price for ${model}`);
    const flat = found.plan ? flatPrice(found.plan, priced) : undefined;
    let total: number;
    let applied: Record<string, unknown> | undefined;
    if (flat !== undefined) {
      total = flat;
      applied = priceEntry(priceProvider);
    } else {
      const result = calcPrice(priced, model, { provider: priceProvider });
      if (!result) return unpriced(`${PRICE_SOURCE} has no price for ${model}`);
      total = result.total_price;
      applied = result.model_price;
    }
    for (const fee of libraryFees)
      if (applied?.[LIBRARY_TOOL_PRICES[fee]!] == null) missing.push(`${fee} ×${priced[fee]}`);
    if (missing.length === 0) return { cost_usd: total, price_source: PRICE_SOURCE };
    return {
      cost_usd: total,
      price_source: `${PARTIAL}: ${PRICE_SOURCE} has no price for ${missing.sort().join(', ')} on ${model}; the cost leaves them out`,
    };
  } catch {
    return unpriced('the price data could not be read'); // malformed price data must not fail a request
  }
}

export interface LibraryUsage {
  /** The library's usage keys: input_tokens the total (uncached + cache reads + cache writes), like our Usage. */
  priced: Record<string, number>;
  audio: AudioPriced | null;
  image: number;
  /** Tool fees handed to the library (its units): priced only where the model's entry has the rate. */
  libraryFees: string[];
  /** Tool fees the library has no unit for, with their counts. */
  missing: Array<[string, number]>;
  /** Tool fees the provider documents as free, with their counts. */
  free: Array<[string, number]>;
}

/** A usage in the library's terms, or why it cannot be priced. */
export function libraryUsage(usage: Usage, freeFees: FreeToolFees): LibraryUsage | string {
  if (usage.input_tokens === null || usage.output_tokens === null) return 'the response reported no usage';
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
  if (cacheRead + cacheWrite > usage.input_tokens) return 'inconsistent token counts';
  const audio = audioUsage(usage);
  if (audio === undefined) return 'inconsistent token counts';
  Object.assign(priced, audio);
  const image = usage.input_image_tokens ?? 0;
  if (image > usage.input_tokens) return 'inconsistent token counts';
  if (image > 0) priced.input_image_tokens = image;
  const out: LibraryUsage = { priced, audio, image, libraryFees: [], missing: [], free: [] };
  for (const [fee, count] of Object.entries(usage.tool_uses ?? {})) {
    if (!count || count <= 0) continue;
    if (freeFees[fee] !== undefined) out.free.push([fee, count]);
    else if (LIBRARY_TOOL_PRICES[fee] === undefined) out.missing.push([fee, count]);
    else {
      priced[fee] = count;
      out.libraryFees.push(fee);
    }
  }
  return out;
}

/** The price key of a library tool fee (`web_searches` → `web_searches_kcount`). */
export function libraryToolPriceKey(fee: string): string | undefined {
  return LIBRARY_TOOL_PRICES[fee];
}

/**
 * Models billed by the length of their input audio (whisper-1). The library holds their rate
 * (`input_audio_hours`) but its calculation does not apply it, so the rate is read from its data here.
 */
function durationCost(
  providerId: string,
  model: string,
  seconds: number,
): { cost_usd: number | null; price_source: string } {
  try {
    const priceProvider = findPriceProvider(providerId, model);
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
export function priceBatchUsage(
  providerId: string,
  model: string | null,
  usage: Usage,
  discount: { factor: number; documented: string },
  freeFees: FreeToolFees = {},
): { cost_usd: number | null; price_source: string | null } {
  if (model) {
    try {
      const batchModel = `${model}:batch`;
      // A batch entry must be the model's own (`…:batch`), not a looser match of the longer name.
      const probe = findPriceProvider(providerId, batchModel);
      if (probe?.models[0]?.id.endsWith(':batch')) {
        const priced = priceUsage(providerId, batchModel, usage, freeFees);
        if (priced.cost_usd !== null)
          return {
            ...priced,
            price_source: priced.price_source?.startsWith(PARTIAL)
              ? `${priced.price_source}; batch price`
              : `${PRICE_SOURCE} batch price`,
          };
      }
    } catch {
      // no batch entry: the discount below
    }
  }
  const standard = priceUsage(providerId, model, usage, freeFees);
  if (standard.cost_usd === null) return standard;
  const discounted = `× ${discount.factor} batch discount (${discount.documented})`;
  return {
    cost_usd: standard.cost_usd * discount.factor,
    price_source: standard.price_source?.startsWith(PARTIAL)
      ? `${standard.price_source}; ${discounted}`
      : `${PRICE_SOURCE} ${discounted}`,
  };
}
