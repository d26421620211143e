/** OpenAI's usage objects and SSE events (chat completions, legacy completions, Responses, embeddings). */
import { addDeltaText, type OutputCounter } from '../../usage/estimate.js';
import { findUsageObject, isRecord, modelInHead, num, sub, type TokenCounts } from '../../usage/normalize.js';
import { addStringFields } from '../../usage/stream-reader.js';
import type { Reported, SseEventReader, UsageReader } from '../types.js';

/** Chat/completions/embeddings (`prompt_tokens`…) or the Responses API (`input_tokens`…). */
export function normalizeOpenAIUsage(u: unknown): TokenCounts | null {
  if (!isRecord(u)) return null;
  const responsesShape = num(u.input_tokens) !== null;
  const input = responsesShape ? num(u.input_tokens) : num(u.prompt_tokens);
  if (input === null) return null;
  const output = responsesShape ? num(u.output_tokens) : num(u.completion_tokens);
  const inDetails = responsesShape ? u.input_tokens_details : u.prompt_tokens_details;
  const outDetails = responsesShape ? u.output_tokens_details : u.completion_tokens_details;
  return {
    input_tokens: input, // already includes cached tokens
    // OpenAI reports cached tokens when there are any; a usage object without them means none were cached.
    cache_read_tokens: num(sub(inDetails, 'cached_tokens')) ?? 0,
    cache_write_tokens: 0, // OpenAI has no separately billed cache writes
    // Embeddings produce no output; a chat usage without completion_tokens is an odd server: say unknown.
    output_tokens: output ?? (u.completion_tokens === undefined && u.output_tokens === undefined ? 0 : null),
    reasoning_tokens: num(sub(outDetails, 'reasoning_tokens')),
  };
}

function json(usage: unknown): { counts: TokenCounts | null; final: boolean } {
  const counts = normalizeOpenAIUsage(usage);
  return { counts, final: counts !== null };
}

/** Text-bearing string fields of the frequent delta events, read without parsing the event's JSON. */
const CHAT_TEXT_FIELDS = /"(?:content|reasoning_content|refusal|arguments|text)"\s*:\s*"/g;
const RESPONSES_TEXT_FIELDS = /"delta"\s*:\s*"/g;
const USAGE_OBJECT = /"usage"\s*:\s*\{/;

/** OpenAI reports usage once, at the end: counts seen means final. */
abstract class OpenAIStream implements SseEventReader {
  protected counts: TokenCounts | null = null;
  protected model: string | null = null;
  constructor(protected readonly output: OutputCounter) {}
  protected noteModel(m: unknown): void {
    if (this.model === null && typeof m === 'string' && m !== '') this.model = m;
  }
  abstract skim(event: string, data: string): boolean;
  abstract onEvent(data: Record<string, unknown>): void;
  onClipped(data: string): void {
    this.noteModel(modelInHead(data));
    this.counts = normalizeOpenAIUsage(findUsageObject(data)) ?? this.counts;
  }
  reported(): Reported {
    return { counts: this.counts, model: this.model, final: this.counts !== null };
  }
}

/** Chat completions (and legacy completions): `choices[].delta`, a final chunk with `usage`. */
class ChatStream extends OpenAIStream {
  skim(_event: string, data: string): boolean {
    // The first chunk names the model; a usage chunk must be parsed.
    if (this.model === null || (data.includes('"usage"') && USAGE_OBJECT.test(data))) return false;
    addStringFields(data, CHAT_TEXT_FIELDS, this.output);
    return true;
  }
  onEvent(data: Record<string, unknown>): void {
    this.noteModel(data.model);
    if (isRecord(data.usage)) this.counts = normalizeOpenAIUsage(data.usage) ?? this.counts;
    if (!Array.isArray(data.choices)) return;
    for (const choice of data.choices) {
      if (!isRecord(choice)) continue;
      if (isRecord(choice.delta)) addDeltaText(choice.delta, this.output);
      if (typeof choice.text === 'string') this.output.add(choice.text); // legacy completions
    }
  }
}

/** Responses: typed events; `response.completed`/`incomplete`/`failed` carry the final usage. */
class ResponsesStream extends OpenAIStream {
  skim(event: string, data: string): boolean {
    if (!event.endsWith('.delta')) return false;
    if (!event.includes('audio')) addStringFields(data, RESPONSES_TEXT_FIELDS, this.output);
    return true;
  }
  onEvent(data: Record<string, unknown>): void {
    const type = typeof data.type === 'string' ? data.type : '';
    if (isRecord(data.response)) {
      this.noteModel(data.response.model);
      if (isRecord(data.response.usage))
        this.counts = normalizeOpenAIUsage(data.response.usage) ?? this.counts;
    }
    if (type.endsWith('.delta') && !type.includes('audio') && typeof data.delta === 'string')
      this.output.add(data.delta);
  }
}

export const CHAT_USAGE: UsageReader = { json, sse: (o) => new ChatStream(o), generatesOutput: true };
export const RESPONSES_USAGE: UsageReader = {
  json,
  sse: (o) => new ResponsesStream(o),
  generatesOutput: true,
};
export const EMBEDDINGS_USAGE: UsageReader = { json, sse: (o) => new ChatStream(o), generatesOutput: false };
