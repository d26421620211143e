/** OpenAI's usage objects and SSE events (chat completions, legacy completions, Responses, embeddings). */
import {
  addDeltaText,
  addStringFields,
  findUsageObject,
  finishReasonList,
  isRecord,
  modelInHead,
  noteFinishReason,
  num,
  type OutputCounter,
  type Reported,
  type SseEventReader,
  sub,
  type TokenCounts,
  type UsageReader,
} from '../../usage/index.js';
import { chatToolUses, OpenAIToolCounter, responsesToolUses } from './tools.js';

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

function withTools(counts: TokenCounts | null, tools: TokenCounts['tool_uses']): TokenCounts | null {
  return counts && tools ? { ...counts, tool_uses: tools } : counts;
}

function chatJson(usage: unknown, body?: Record<string, unknown>) {
  const counts = normalizeOpenAIUsage(usage);
  const model = typeof body?.model === 'string' ? body.model : null;
  return { counts: withTools(counts, chatToolUses(model)), final: counts !== null };
}

function responsesJson(usage: unknown, body?: Record<string, unknown>) {
  const counts = normalizeOpenAIUsage(usage);
  return { counts: withTools(counts, responsesToolUses(body)), final: counts !== null };
}

/** A choice's reason in a chat body's text (JSON escapes `"` inside strings, so a match is a member). */
const FINISH_REASON = /"finish_reason"\s*:\s*"([^"\\]{1,64})"/g;

/** `choices[].finish_reason` of a chat (or legacy completions) body: its choices, else its text. */
function chatFinishReasons(body: Record<string, unknown>, text: string | null): string[] {
  const reasons: string[] = [];
  if (Array.isArray(body.choices)) {
    for (const c of body.choices)
      if (isRecord(c)) noteFinishReason(reasons, c.finish_reason, num(c.index) ?? reasons.length);
  } else if (text !== null) {
    for (const m of text.matchAll(FINISH_REASON)) noteFinishReason(reasons, m[1]);
  }
  return finishReasonList(reasons) ?? [];
}

/** A Responses object's `status` (`completed`, `incomplete`, `failed`…): how the response ended. */
function responsesFinishReasons(body: Record<string, unknown>): string[] {
  const reasons: string[] = [];
  noteFinishReason(reasons, body.status);
  return reasons;
}

/** Text-bearing string fields of the frequent delta events, read without parsing the event's JSON. */
const CHAT_TEXT_FIELDS = /"(?:content|reasoning_content|refusal|arguments|text)"\s*:\s*"/g;
const RESPONSES_TEXT_FIELDS = /"delta"\s*:\s*"/g;
const USAGE_OBJECT = /"usage"\s*:\s*\{/;

/** OpenAI reports usage once, at the end: counts seen means final. */
abstract class OpenAIStream implements SseEventReader {
  protected counts: TokenCounts | null = null;
  protected model: string | null = null;
  protected readonly reasons: string[] = [];
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
  protected toolUses(): TokenCounts['tool_uses'] {
    return undefined;
  }
  reported(): Reported {
    return {
      counts: withTools(this.counts, this.toolUses()),
      model: this.model,
      final: this.counts !== null,
      finishReasons: finishReasonList(this.reasons),
    };
  }
}

/** A chunk whose choice names a reason: every delta carries `"finish_reason":null` until the last. */
function hasFinishReason(data: string): boolean {
  const at = data.indexOf('"finish_reason"');
  return at >= 0 && /^"finish_reason"\s*:\s*"/.test(data.slice(at, at + 24));
}

/** Chat completions (and legacy completions): `choices[].delta`, a final chunk with `usage`. */
class ChatStream extends OpenAIStream {
  skim(_event: string, data: string): boolean {
    // The first chunk names the model; a usage chunk must be parsed, and so must a choice's last one.
    if (this.model === null || (data.includes('"usage"') && USAGE_OBJECT.test(data))) return false;
    if (hasFinishReason(data)) return false;
    addStringFields(data, CHAT_TEXT_FIELDS, this.output);
    return true;
  }
  onEvent(data: Record<string, unknown>): void {
    this.noteModel(data.model);
    if (isRecord(data.usage)) this.counts = normalizeOpenAIUsage(data.usage) ?? this.counts;
    if (!Array.isArray(data.choices)) return;
    for (const choice of data.choices) {
      if (!isRecord(choice)) continue;
      noteFinishReason(this.reasons, choice.finish_reason, num(choice.index) ?? 0);
      if (isRecord(choice.delta)) addDeltaText(choice.delta, this.output);
      if (typeof choice.text === 'string') this.output.add(choice.text); // legacy completions
    }
  }
  protected override toolUses(): TokenCounts['tool_uses'] {
    return chatToolUses(this.model);
  }
}

/** Responses: typed events; `response.completed`/`incomplete`/`failed` carry the final usage. */
class ResponsesStream extends OpenAIStream {
  private readonly tools = new OpenAIToolCounter();
  skim(event: string, data: string): boolean {
    if (!event.endsWith('.delta')) return false;
    if (!event.includes('audio')) addStringFields(data, RESPONSES_TEXT_FIELDS, this.output);
    return true;
  }
  onEvent(data: Record<string, unknown>): void {
    const type = typeof data.type === 'string' ? data.type : '';
    if (isRecord(data.response)) {
      this.noteModel(data.response.model);
      if (type !== 'response.created' && type !== 'response.in_progress')
        noteFinishReason(this.reasons, data.response.status, 0);
      if (isRecord(data.response.usage))
        this.counts = normalizeOpenAIUsage(data.response.usage) ?? this.counts;
      this.tools.addOutput(data.response.output);
    }
    // Each item as it finishes: a final event too big to read whole still leaves every tool call counted.
    if (type === 'response.output_item.done') this.tools.add(data.item);
    if (type.endsWith('.delta') && !type.includes('audio') && typeof data.delta === 'string')
      this.output.add(data.delta);
  }
  protected override toolUses(): TokenCounts['tool_uses'] {
    return this.tools.uses();
  }
}

export const CHAT_USAGE: UsageReader = {
  json: chatJson,
  finishReasons: chatFinishReasons,
  sse: (o) => new ChatStream(o),
  generatesOutput: true,
};
export const RESPONSES_USAGE: UsageReader = {
  json: responsesJson,
  bodyMembers: ['output', 'status'],
  finishReasons: responsesFinishReasons,
  sse: (o) => new ResponsesStream(o),
  generatesOutput: true,
};
export const EMBEDDINGS_USAGE: UsageReader = { json, sse: (o) => new ChatStream(o), generatesOutput: false };
