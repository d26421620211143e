/**
 * The library's price arithmetic, done directly for models with one price entry (flat, or tiered by input
 * tokens; not dated or time-of-day prices): the same operations in the same order as
 * @pydantic/genai-prices 0.1.8, so the same number to the last bit. `calcPrice` copies the provider entry
 * and re-validates the price keys on every call (7.6 µs a call in a warm loop); this is ~0.3 µs. Anything
 * it does not cover (an unknown price key, a usage the library would refuse) answers `undefined`, and the
 * caller asks the library. flat-price.test.ts compares both across every OpenAI and Anthropic model of the
 * bundled table: a library upgrade that changes its arithmetic fails it.
 */
import type { ModelInfo } from '@pydantic/genai-prices';

interface Unit {
  usageKey: string;
  per: number;
  dimensions: Readonly<Record<string, string>>;
}

/**
 * The library's units (its registry is not exported) for the price keys OpenAI and Anthropic models use.
 * A model with a price key not listed here is priced by the library.
 */
const UNITS: Readonly<Record<string, Unit>> = Object.fromEntries(
  (
    [
      ['input_mtok', 'input_tokens', 1e6, { direction: 'input', family: 'tokens' }],
      ['output_mtok', 'output_tokens', 1e6, { direction: 'output', family: 'tokens' }],
      [
        'cache_read_mtok',
        'cache_read_tokens',
        1e6,
        { direction: 'input', family: 'tokens', token_type: 'cache_read' },
      ],
      [
        'cache_write_mtok',
        'cache_write_tokens',
        1e6,
        { direction: 'input', family: 'tokens', token_type: 'cache_write' },
      ],
      [
        'cache_write_1h_mtok',
        'cache_write_1h_tokens',
        1e6,
        { cache_ttl: '1h', direction: 'input', family: 'tokens', token_type: 'cache_write' },
      ],
      [
        'input_audio_mtok',
        'input_audio_tokens',
        1e6,
        { direction: 'input', family: 'tokens', modality: 'audio' },
      ],
      [
        'cache_audio_read_mtok',
        'cache_audio_read_tokens',
        1e6,
        { direction: 'input', family: 'tokens', modality: 'audio', token_type: 'cache_read' },
      ],
      [
        'output_audio_mtok',
        'output_audio_tokens',
        1e6,
        { direction: 'output', family: 'tokens', modality: 'audio' },
      ],
      [
        'input_image_mtok',
        'input_image_tokens',
        1e6,
        { direction: 'input', family: 'tokens', modality: 'image' },
      ],
      [
        'cache_image_read_mtok',
        'cache_image_read_tokens',
        1e6,
        { direction: 'input', family: 'tokens', modality: 'image', token_type: 'cache_read' },
      ],
      [
        'output_image_mtok',
        'output_image_tokens',
        1e6,
        { direction: 'output', family: 'tokens', modality: 'image' },
      ],
      ['web_searches_kcount', 'web_searches', 1e3, { family: 'tool_calls', tool_type: 'web_search' }],
      [
        'storage_searches_kcount',
        'storage_searches',
        1e3,
        { family: 'tool_calls', tool_type: 'storage_search' },
      ],
      ['requests_kcount', 'requests', 1e3, { family: 'requests' }],
    ] as const
  ).map(([priceKey, usageKey, per, dimensions]) => [priceKey, { usageKey, per, dimensions }]),
);

const UNIT_BY_USAGE_KEY = new Map(Object.values(UNITS).map((u) => [u.usageKey, u]));
/** A bit per usage key, to remember which combinations of present and non-zero keys the library accepts. */
const BIT = new Map(Object.values(UNITS).map((u, i) => [u.usageKey, 1 << i]));

/** Every dimension of `a` is in `b` with the same value: `b` is `a` or a part of it. */
function within(a: Unit, b: Unit): boolean {
  return Object.entries(a.dimensions).every(([k, v]) => b.dimensions[k] === v);
}

/** No dimension of `a` contradicts `b`'s. */
function compatible(a: Unit, b: Unit): boolean {
  return Object.entries(a.dimensions).every(
    ([k, v]) => b.dimensions[k] === undefined || b.dimensions[k] === v,
  );
}

function sameDimensions(a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>): boolean {
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => a[k] === b[k]);
}

/** A price that steps up once the request's input tokens pass a threshold (long-context rates). */
interface Tiered {
  base: number;
  /** By start, ascending, like the library's TieredPrices. */
  tiers: Array<{ start: number; price: number }>;
}

interface PricedUnit {
  unit: Unit;
  price: number | Tiered;
  /** 0 input, 1 output, 2 other: the library sums each apart, then adds them in that order. */
  direction: 0 | 1 | 2;
}

export interface FlatPlan {
  /** In the price entry's key order: the order the library adds the prices in. */
  priced: PricedUnit[];
  /** Token units in the library's leaf order (most specific first), each with the more specific ones to subtract. */
  leaves: Array<{ unit: Unit; minus: Unit[] }>;
  hasRequests: boolean;
  /** Some price is tiered by the input token count. */
  tiered: boolean;
  /** Per set of usage keys present and non-zero (bit masks): whether the library accepts such a usage. */
  accepts: Map<number, boolean>;
}

/** A plan for the model's price, or null when only the library can price it. */
export function flatPlan(model: ModelInfo): FlatPlan | null {
  if (Array.isArray(model.prices)) return null; // dated or time-of-day prices
  const priced: PricedUnit[] = [];
  for (const [key, value] of Object.entries(model.prices)) {
    if (value === undefined) continue;
    const unit = UNITS[key];
    const price = validPrice(value);
    if (!unit || price === null) return null; // unknown to this plan, or refused by the library
    const dir = unit.dimensions.direction;
    priced.push({ unit, price, direction: dir === 'input' ? 0 : dir === 'output' ? 1 : 2 });
  }
  const tokenUnits = priced.map((p) => p.unit).filter((u) => u.usageKey !== 'requests');
  const sorted = [...tokenUnits].sort(
    (a, b) =>
      Object.keys(b.dimensions).length - Object.keys(a.dimensions).length ||
      a.usageKey.localeCompare(b.usageKey),
  );
  const leaves = sorted.map((unit) => ({
    unit,
    minus: sorted.filter((p) => p !== unit && within(unit, p)),
  }));
  return {
    priced,
    leaves,
    hasRequests: tokenUnits.length < priced.length,
    tiered: priced.some((p) => typeof p.price === 'object'),
    accepts: new Map(),
  };
}

function isRate(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0;
}

/** A price as the library reads it (a rate, or a base rate with tiers), null where it would refuse it. */
function validPrice(value: unknown): number | Tiered | null {
  if (isRate(value)) return value;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return null;
  const { base, tiers } = value as { base?: unknown; tiers?: unknown };
  if (!isRate(base) || !Array.isArray(tiers)) return null;
  const steps: Tiered['tiers'] = [];
  for (const tier of tiers as unknown[]) {
    if (typeof tier !== 'object' || tier === null || Array.isArray(tier)) return null;
    const { start, price } = tier as { start?: unknown; price?: unknown };
    if (typeof start !== 'number' || !Number.isSafeInteger(start) || start < 0 || !isRate(price)) return null;
    steps.push({ start, price });
  }
  return { base, tiers: steps.sort((a, b) => a.start - b.start) };
}

/**
 * Whether the library prices this usage rather than refusing it: it refuses a usage that leaves a priced
 * unit out while reporting a part of it, or two overlapping parts whose overlap is that unit.
 */
function accepted(plan: FlatPlan, usage: Readonly<Record<string, number>>): boolean {
  const positive = Object.keys(usage)
    .filter((k) => usage[k]! > 0)
    .map((k) => UNIT_BY_USAGE_KEY.get(k)!);
  for (const { unit } of plan.leaves) {
    if (usage[unit.usageKey] !== undefined) continue;
    if (positive.some((p) => p !== unit && within(unit, p))) return false;
    for (let i = 0; i < positive.length; i++)
      for (let j = i + 1; j < positive.length; j++) {
        const a = positive[i]!;
        const b = positive[j]!;
        if (!compatible(a, b) || within(a, b) || within(b, a)) continue;
        if (sameDimensions({ ...a.dimensions, ...b.dimensions }, unit.dimensions)) return false;
      }
  }
  return true;
}

/**
 * The library's total price for `usage` (its usage keys, all tokens included in their parents), or
 * undefined when the library must be asked (a key this plan does not know, a refused or negative split).
 */
export function flatPrice(plan: FlatPlan, usage: Readonly<Record<string, number>>): number | undefined {
  let present = 0;
  let positive = 0;
  for (const key in usage) {
    const value = usage[key]!;
    const bit = BIT.get(key);
    if (bit === undefined || key === 'requests' || !Number.isFinite(value) || value < 0) return undefined;
    present |= bit;
    if (value > 0) positive |= bit;
  }
  const shape = present * 0x10000 + positive;
  let ok = plan.accepts.get(shape);
  if (ok === undefined) {
    ok = accepted(plan, usage);
    if (plan.accepts.size < 64) plan.accepts.set(shape, ok);
  }
  if (!ok) return undefined;
  const inputTokens = usage.input_tokens;
  if (plan.tiered && inputTokens === undefined) return undefined;
  const leaf = leafSplit(plan, usage);
  if (!leaf) return undefined;
  let input = 0;
  let output = 0;
  let other = 0;
  for (const { unit, price, direction } of plan.priced) {
    const tokens = leaf[unit.usageKey] ?? 0;
    const cost =
      typeof price === 'number'
        ? (price * tokens) / unit.per
        : (tierCost(price, tokens, inputTokens!) * 1e6) / unit.per;
    if (direction === 0) input += cost;
    else if (direction === 1) output += cost;
    else other += cost;
  }
  return input + output + other;
}

/** The library's leaf split: each unit's own tokens are its count less its more specific parts'. */
function leafSplit(plan: FlatPlan, usage: Readonly<Record<string, number>>): Record<string, number> | null {
  const leaf: Record<string, number> = {};
  const n = plan.leaves.length;
  for (const { unit, minus } of plan.leaves) {
    const total = usage[unit.usageKey] ?? 0;
    let parts = 0;
    for (const p of minus) parts += leaf[p.usageKey]!;
    let own = total - parts;
    const tolerance = Number.EPSILON * Math.max(1, Math.abs(total), Math.abs(parts)) * (n + 1);
    if (own < 0 && Math.abs(own) <= tolerance) own = 0;
    if (own < 0) return null; // the library refuses it
    leaf[unit.usageKey] = own;
  }
  if (plan.hasRequests) leaf.requests = 1;
  return leaf;
}

/** One priced part of a cost: the price key, the quantity billed at it, the rate applied and per how many. */
export interface PricedPart {
  priceKey: string;
  quantity: number;
  rate: number;
  per: number;
  cost: number;
  /** The input token count past which this tiered rate applies, when a tier's rate was taken. */
  tierStart: number | null;
}

/**
 * The parts `flatPrice` adds, each with its quantity (the leaf split) and the rate it took (a tier's where
 * the input passes its start), or undefined where flatPrice would be.
 */
export function flatParts(plan: FlatPlan, usage: Readonly<Record<string, number>>): PricedPart[] | undefined {
  if (flatPrice(plan, usage) === undefined) return undefined;
  const leaf = leafSplit(plan, usage)!;
  const inputTokens = usage.input_tokens ?? 0;
  const out: PricedPart[] = [];
  for (const [priceKey, unit] of Object.entries(UNITS)) {
    const entry = plan.priced.find((p) => p.unit === unit);
    if (!entry) continue;
    const quantity = leaf[unit.usageKey] ?? 0;
    let rate: number;
    let tierStart: number | null = null;
    if (typeof entry.price === 'number') rate = entry.price;
    else {
      rate = entry.price.base;
      for (const tier of entry.price.tiers)
        if (inputTokens > tier.start) {
          rate = tier.price;
          tierStart = tier.start;
        }
    }
    out.push({ priceKey, quantity, rate, per: unit.per, cost: (rate * quantity) / unit.per, tierStart });
  }
  return out;
}

/** The library's tiered price: the rate of the last tier the input token count passes, per million. */
function tierCost(price: Tiered, tokens: number, inputTokens: number): number {
  if (tokens <= 0) return 0;
  let rate = price.base;
  for (const tier of price.tiers) if (inputTokens > tier.start) rate = tier.price;
  return (rate * tokens) / 1e6;
}
