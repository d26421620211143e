/**
 * Token estimates for when the provider reported no usage (a stream cut short, a stream without a usage
 * chunk). gpt-tokenizer's o200k_base is exact for current OpenAI models and a fair approximation for
 * Anthropic's; either way the row says `estimated`.
 */
import { createRequire } from 'node:module';
import { isRecord } from './normalize.js';

type CountTokens = (text: string, opts: { disallowedSpecial: Set<string> }) => number;

/**
 * The o200k tables cost ~50 MB of memory and ~200 ms to load, and estimates are the exception (most
 * responses report usage): load them on the first estimate, not at start.
 */
let countTokens: CountTokens | null = null;
function tokenizer(): CountTokens {
  countTokens ??= (
    createRequire(import.meta.url)('gpt-tokenizer/encoding/o200k_base') as { countTokens: CountTokens }
  ).countTokens;
  return countTokens;
}

/** Text beyond this is not tokenized but extrapolated from what was: keeps a huge prompt cheap. */
const SAMPLE_CHARS = 256 * 1024;
/** Per-message framing tokens (role markers etc.), per OpenAI's cookbook counting recipe. */
const PER_MESSAGE_TOKENS = 4;
const PER_REQUEST_TOKENS = 3;
const NO_SPECIAL = { disallowedSpecial: new Set<string>() };

/** Keys whose string values are identifiers, markup or binary, not prompt text. */
export const SKIP_KEYS = new Set([
  'type',
  'role',
  'id',
  'tool_call_id',
  'tool_use_id',
  'media_type',
  'data',
  'url',
  'image_url',
  'file_data',
  'file_id',
  'cache_control',
  'signature',
]);

export function countTextTokens(text: string): number {
  if (text.length === 0) return 0;
  const count = tokenizer();
  if (text.length <= SAMPLE_CHARS) return count(text, NO_SPECIAL);
  const sample = count(text.slice(0, SAMPLE_CHARS), NO_SPECIAL);
  return Math.round((sample * text.length) / SAMPLE_CHARS);
}

function collectStrings(value: unknown, out: string[], budget: { chars: number }): void {
  if (budget.chars <= 0) return;
  if (typeof value === 'string') {
    out.push(value);
    budget.chars -= value.length;
  } else if (Array.isArray(value)) {
    for (const v of value) collectStrings(v, out, budget);
  } else if (isRecord(value)) {
    for (const [k, v] of Object.entries(value)) if (!SKIP_KEYS.has(k)) collectStrings(v, out, budget);
  }
}

function countValueTokens(value: unknown): number {
  const parts: string[] = [];
  const budget = { chars: SAMPLE_CHARS * 8 };
  collectStrings(value, parts, budget);
  return countTextTokens(parts.join('\n'));
}

/** Prompt tokens of a request body (chat, responses, completions, embeddings, messages); null if none. */
export function estimateRequestTokens(json: unknown): number | null {
  if (!isRecord(json)) return null;
  let tokens = 0;
  let found = false;
  if (Array.isArray(json.messages)) {
    found = true;
    tokens +=
      PER_REQUEST_TOKENS + json.messages.length * PER_MESSAGE_TOKENS + countValueTokens(json.messages);
  }
  for (const key of ['system', 'instructions', 'prompt', 'input'] as const) {
    const v = json[key];
    if (v === undefined || v === null) continue;
    found = true;
    // Embeddings accept pre-tokenized input: arrays of token ids.
    if (Array.isArray(v) && v.every((x) => typeof x === 'number')) tokens += v.length;
    else if (Array.isArray(v) && v.every((x) => Array.isArray(x))) {
      tokens += v.reduce((n: number, x: unknown[]) => n + x.length, 0);
    } else tokens += countValueTokens(v);
  }
  // Tool definitions are rendered into the prompt; their JSON is a fair stand-in.
  if (Array.isArray(json.tools) && json.tools.length > 0)
    tokens += countTextTokens(JSON.stringify(json.tools));
  return found ? tokens : null;
}

/**
 * Accumulates generated text as it streams, for an estimate that is usually never asked for (the provider
 * reports usage). Nothing is tokenized while streaming: it keeps the first `sampleChars` characters and a
 * count of the rest, and extrapolates from the sample only when total() is called.
 */
export class OutputCounter {
  private sample: string[] = [];
  private sampleChars = 0;
  private chars = 0;

  constructor(private readonly maxSampleChars = 64 * 1024) {}

  add(text: string): void {
    if (text.length === 0) return;
    this.chars += text.length;
    if (this.sampleChars >= this.maxSampleChars) return;
    const room = this.maxSampleChars - this.sampleChars;
    const kept = text.length <= room ? text : text.slice(0, room);
    this.sample.push(kept);
    this.sampleChars += kept.length;
  }

  /** The generated text, up to the sample's size (its first characters). */
  text(): string {
    if (this.sample.length > 1) this.sample = [this.sample.join('')];
    return this.sample[0] ?? '';
  }

  /** Characters of generated text seen, the ones past the sample included. */
  get length(): number {
    return this.chars;
  }

  /** Has any generated text been seen? */
  get seen(): boolean {
    return this.chars > 0;
  }

  total(): number {
    if (this.chars === 0) return 0;
    const counted = countTextTokens(this.text());
    return this.chars === this.sampleChars ? counted : Math.round((counted * this.chars) / this.sampleChars);
  }
}

/** Generated text inside a complete (non-streamed) response body, for the estimate. */
export function collectResponseText(json: unknown, counter: OutputCounter): void {
  if (!isRecord(json)) return;
  if (Array.isArray(json.choices)) {
    for (const c of json.choices) {
      if (!isRecord(c)) continue;
      if (typeof c.text === 'string') counter.add(c.text);
      if (isRecord(c.message)) addDeltaText(c.message, counter);
    }
  }
  if (Array.isArray(json.content)) {
    for (const block of json.content) if (isRecord(block)) addAnthropicBlockText(block, counter);
  }
  if (typeof json.completion === 'string') counter.add(json.completion);
  if (Array.isArray(json.output)) {
    for (const item of json.output) {
      if (!isRecord(item)) continue;
      if (typeof item.arguments === 'string') counter.add(item.arguments);
      if (Array.isArray(item.content)) {
        for (const part of item.content)
          if (isRecord(part) && typeof part.text === 'string') counter.add(part.text);
      }
    }
  }
}

/** OpenAI chat `message` or streamed `delta`. */
export function addDeltaText(delta: Record<string, unknown>, counter: OutputCounter): void {
  if (typeof delta.content === 'string') counter.add(delta.content);
  if (typeof delta.reasoning_content === 'string') counter.add(delta.reasoning_content);
  if (typeof delta.refusal === 'string') counter.add(delta.refusal);
  if (Array.isArray(delta.tool_calls)) {
    for (const call of delta.tool_calls) {
      if (isRecord(call) && isRecord(call.function)) {
        if (typeof call.function.name === 'string') counter.add(call.function.name);
        if (typeof call.function.arguments === 'string') counter.add(call.function.arguments);
      }
    }
  }
}

/** Anthropic content block (complete) or content_block_delta's `delta`. */
export function addAnthropicBlockText(block: Record<string, unknown>, counter: OutputCounter): void {
  for (const key of ['text', 'thinking', 'partial_json'] as const) {
    const v = block[key];
    if (typeof v === 'string') counter.add(v);
  }
  if (block.type === 'tool_use' && block.input !== undefined) counter.add(JSON.stringify(block.input));
}
