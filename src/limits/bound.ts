/**
 * What a request may cost at most, decided before it goes upstream (hard budgets, tokens per minute), and
 * which requests count at all. The bound is the input estimated from the body (o200k tokenizer, as the
 * usage estimates) plus the output the request allows itself (`max_tokens`, `max_output_tokens`,
 * `max_completion_tokens`, times `n` choices), or the deployment's default allowance when it names none,
 * each at the model's highest per-token rate in the price library.
 */
import { countTextTokens, isRecord, SKIP_KEYS, type Usage } from '../usage/index.js';
import { computeCost, type RequestInfo } from '../metering/index.js';
import { endpointOf, type EndpointClass } from '../providers/index.js';
import type { Provider } from '../types.js';
import type { KeyRecord } from '../store/types.js';

const TOKEN_BOUNDED: ReadonlySet<EndpointClass> = new Set([
  'chat',
  'completions',
  'responses',
  'embeddings',
  'messages',
  'complete',
]);

/** How a request is billed: not at all, by tokens at the model's price, or in a way not priced up front. */
export type RequestClass = 'free' | 'tokens' | 'unpriced';

/** Token counting (Anthropic, OpenAI Responses): a call that reads, never bills. */
const isTokenCount = (path: string) => path.endsWith('/count_tokens') || path.endsWith('/input_tokens');
const isCancel = (path: string) => path.endsWith('/cancel');

/**
 * Listings, retrievals, deletions, token counting, cancellations and moderations cost nothing; the
 * token-billed endpoints are priced; every other write (audio, images, batches, uploads…) is unpriced here.
 */
export function requestClass(provider: Provider, method: string, path: string): RequestClass {
  if (method === 'GET' || method === 'HEAD' || method === 'OPTIONS' || method === 'DELETE') return 'free';
  if (isTokenCount(path) || isCancel(path) || path.endsWith('/moderations')) return 'free';
  // Bounded up front only where the bill is text tokens the body bounds; audio, images and batches are
  // priced once they end (docs/pricing.md) but have no bound before they start.
  return TOKEN_BOUNDED.has(endpointOf(provider, path).class) ? 'tokens' : 'unpriced';
}

/** Not counted by an rpm with scope `billable`: listings, retrievals and token counting. */
export function isRpmExempt(method: string, path: string): boolean {
  return method === 'GET' || method === 'HEAD' || method === 'OPTIONS' || isTokenCount(path);
}

/** Whether the key has an rpm that counts this request. */
export const countsRpm = (key: KeyRecord, method: string, path: string): boolean =>
  key.rate_limit_rpm != null && (key.rate_limit_scope === 'all' || !isRpmExempt(method, path));

export interface RequestBound {
  /** Input estimate plus output allowance: what counts against tokens per minute at admission. */
  tokens: number;
  /** Upper bound of the cost in nanodollars; null when the model has no price. */
  nanos: number | null;
}

const OUTPUT_FIELDS = ['max_tokens', 'max_output_tokens', 'max_completion_tokens'] as const;

/** The output the body allows itself, or null when it names no bound. */
export function outputAllowance(json: unknown): number | null {
  if (!isRecord(json)) return null;
  let max: number | null = null;
  for (const f of OUTPUT_FIELDS) {
    const v = json[f];
    if (typeof v === 'number' && Number.isFinite(v) && v >= 0) max = Math.max(max ?? 0, Math.ceil(v));
  }
  if (max === null) return null;
  // Chat's `n` asks for that many choices, each up to max_tokens.
  const n = json.n;
  return typeof n === 'number' && Number.isInteger(n) && n > 1 ? max * n : max;
}

interface Rates {
  input: number; // nanodollars per token
  output: number;
}

/** Per (provider, model): the library's rates, or null when it does not price the model. Bounded. */
const rates = new Map<string, Rates | null>();
const RATES_MAX = 1000;
const MTOK = 1_000_000;

function tokens(input: number, output: number, cacheWrite = 0): Usage {
  return {
    input_tokens: input,
    cache_read_tokens: 0,
    cache_write_tokens: cacheWrite,
    output_tokens: output,
    reasoning_tokens: null,
    source: 'provider',
    model: null,
  };
}

/**
 * Prices of a million tokens, so that a tiered price (dearer above some context length) is taken at its
 * dearest tier; input at the larger of the plain and the cache-write rate, since a prompt may be written
 * to the cache.
 */
export function modelRates(provider: Provider, model: string): Rates | null {
  const key = `${provider}\u0000${model}`;
  const known = rates.get(key);
  if (known !== undefined) return known;
  const plain = computeCost(provider, model, tokens(MTOK, 0)).cost_usd;
  const write = computeCost(provider, model, tokens(MTOK, 0, MTOK)).cost_usd;
  const output = computeCost(provider, model, tokens(0, MTOK)).cost_usd;
  const found =
    plain === null || output === null
      ? null
      : { input: (Math.max(plain, write ?? 0) * 1e9) / MTOK, output: (output * 1e9) / MTOK };
  if (rates.size >= RATES_MAX) rates.clear();
  rates.set(key, found);
  return found;
}

/**
 * How the prompt is counted: `tokens` runs the tokenizer (a lookup for strings seen before); `bytes` takes
 * each string's UTF-8 length instead, never fewer than its tokens (a BPE token is at least one byte), about
 * four times as many for English, and free of the tokenizer's cost (~1 µs per 10 characters of new text).
 */
export type PromptCount = 'tokens' | 'bytes';

/** The bound of a token-billed request (see the module comment). */
export function requestBound(
  provider: Provider,
  path: string,
  model: string | null,
  json: unknown,
  defaultOutputTokens: number,
  count: PromptCount = 'tokens',
): RequestBound {
  const input = promptTokens(json, count === 'bytes' ? byteCount : stringTokens);
  // Embeddings generate nothing.
  const output = path.endsWith('/embeddings') ? 0 : (outputAllowance(json) ?? defaultOutputTokens);
  const r = model === null ? null : modelRates(provider, model);
  return {
    tokens: input + output,
    nanos: r === null ? null : Math.ceil(input * r.input + output * r.output),
  };
}

/**
 * A bound counts its prompt in UTF-8 bytes (no tokenizer) when that takes at most this share of the room
 * its key's limits have left; else in tokens, so that near a limit no request is refused on the looser count.
 */
const BYTES_BOUND_SHARE = 1 / 8;

/** The room a key's limits have left (null: no such limit), asked only when needed. */
export interface Room {
  tokens: (() => number) | null;
  nanos: (() => number) | null;
}

/** The bound of a token-billed request with its prompt in bytes where that is small beside `room`. */
export function fittedBound(
  provider: Provider,
  info: RequestInfo,
  defaultOutputTokens: number,
  room: Room,
): RequestBound {
  const { path, model, json } = info;
  const loose = requestBound(provider, path, model, json, defaultOutputTokens, 'bytes');
  const fits = (left: (() => number) | null, need: number | null) =>
    left === null || need === null || need <= left() * BYTES_BOUND_SHARE;
  if (fits(room.tokens, loose.tokens) && fits(room.nanos, loose.nanos)) return loose;
  return requestBound(provider, path, model, json, defaultOutputTokens, 'tokens');
}

/**
 * A WebSocket response.create as a request to admit: billed by tokens like the Responses endpoint, its
 * prompt and output bound read from the event (Realtime nests them under `response`). Context the server
 * already holds (earlier turns, previous responses) is not in the event and not in the bound.
 */
export function socketCreateInfo(
  provider: Provider,
  model: string | null,
  event: Record<string, unknown>,
): RequestInfo {
  const json = isRecord(event.response) ? event.response : event;
  return { provider, path: '/v1/responses', model, stream: true, end_user: null, json };
}

/**
 * Token counts of prompt strings already seen. A conversation resends its system prompt and history with
 * every turn, so most of a request's text was counted before: a lookup instead of a tokenizer pass. Only
 * short strings are kept (≤ 2,000 characters, ≤ 4,096 entries: a few MB at most); cleared when full.
 */
const seen = new Map<string, number>();
const SEEN_MAX = 4096;
const SEEN_CHARS = 2000;
/** Per-message framing tokens (role markers etc.), as usage/estimate.ts counts them. */
const PER_MESSAGE_TOKENS = 4;
const PER_REQUEST_TOKENS = 3;
/** Text beyond this is not walked further: the estimate stops growing (as usage/estimate.ts samples). */
const MAX_CHARS = 2 * 1024 * 1024;

function stringTokens(text: string): number {
  if (text.length > SEEN_CHARS) return countTextTokens(text);
  let n = seen.get(text);
  if (n === undefined) {
    n = countTextTokens(text);
    if (seen.size >= SEEN_MAX) seen.clear();
    seen.set(text, n);
  }
  return n;
}

const byteCount = (text: string) => Buffer.byteLength(text, 'utf8');

interface Walk {
  chars: number;
  count: (text: string) => number;
}

/** Tokens of the strings in a prompt value, plus one per string for the separators between them. */
function valueTokens(value: unknown, walk: Walk): number {
  if (walk.chars <= 0) return 0;
  if (typeof value === 'string') {
    walk.chars -= value.length;
    return value.length === 0 ? 0 : walk.count(value) + 1;
  }
  let n = 0;
  if (Array.isArray(value)) {
    for (const v of value) n += valueTokens(v, walk);
  } else if (isRecord(value)) {
    for (const k in value) if (!SKIP_KEYS.has(k)) n += valueTokens(value[k], walk);
  }
  return n;
}

/**
 * The prompt of a request body (chat, responses, completions, embeddings, messages) in o200k tokens, as
 * usage/estimate.ts counts it, string by string so that repeated text is counted once; with `count` =
 * UTF-8 bytes, an upper bound of that count.
 */
export function promptTokens(json: unknown, count: (text: string) => number = stringTokens): number {
  if (!isRecord(json)) return 0;
  const budget: Walk = { chars: MAX_CHARS, count };
  let tokens = 0;
  if (Array.isArray(json.messages)) {
    tokens +=
      PER_REQUEST_TOKENS + json.messages.length * PER_MESSAGE_TOKENS + valueTokens(json.messages, budget);
  }
  for (const key of ['system', 'instructions', 'prompt', 'input'] as const) {
    const v = json[key];
    if (v === undefined || v === null) continue;
    // Embeddings accept pre-tokenized input: arrays of token ids.
    if (Array.isArray(v) && v.every((x) => typeof x === 'number')) tokens += v.length;
    else if (Array.isArray(v) && v.every((x) => Array.isArray(x))) {
      tokens += v.reduce((n: number, x: unknown[]) => n + x.length, 0);
    } else tokens += valueTokens(v, budget);
  }
  if (Array.isArray(json.tools) && json.tools.length > 0)
    tokens += (count === stringTokens ? countTextTokens : count)(JSON.stringify(json.tools));
  return tokens;
}
