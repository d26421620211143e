/** Usage and generated text from an SSE stream, one complete event at a time. */
import { addAnthropicBlockText, addDeltaText, type OutputCounter } from './estimate.js';
import {
  emptyAnthropicParts,
  findUsageObject,
  isRecord,
  mergeAnthropicUsage,
  normalizeOpenAIUsage,
  type AnthropicParts,
  type Endpoint,
  type TokenCounts,
} from './normalize.js';
import { stringEnd } from './json-members.js';
import { parseSseEvent, SseSplitter, type SseSegment } from './sse-splitter.js';

/** Text-bearing string fields of the frequent delta events, read without parsing the event's JSON. */
const OPENAI_TEXT_FIELDS = /"(?:content|reasoning_content|refusal|arguments|text)"\s*:\s*"/g;
const ANTHROPIC_TEXT_FIELDS = /"(?:text|thinking|partial_json)"\s*:\s*"/g;
const RESPONSES_TEXT_FIELDS = /"delta"\s*:\s*"/g;
const USAGE_OBJECT = /"usage"\s*:\s*\{/;

/** Adds every string value of the matched fields to the counter (JSON strings escape `"`, so a match is a key). */
function addStringFields(data: string, fields: RegExp, output: OutputCounter): void {
  fields.lastIndex = 0;
  let m: RegExpExecArray | null;
  while ((m = fields.exec(data))) {
    const open = m.index + m[0].length - 1;
    const end = stringEnd(data, open);
    if (end < 0) return;
    const literal = data.slice(open, end);
    if (!literal.includes('\\')) output.add(literal.slice(1, -1));
    else {
      try {
        output.add(JSON.parse(literal) as string);
      } catch {
        // malformed escape: skip this piece
      }
    }
    fields.lastIndex = end;
  }
}

export interface StreamReader {
  push(decoded: Buffer): void;
  end(): void;
  /** Usage the provider reported; `final` once its end-of-stream figures (usage chunk, message_delta) arrived. */
  reported(): {
    counts: TokenCounts | null;
    anthropic: AnthropicParts | null;
    model: string | null;
    final: boolean;
  };
}

/** An event bigger than maxEventBytes (a huge `response.completed`) is read from its head and tail only. */
export function createStreamReader(
  endpoint: Endpoint,
  output: OutputCounter,
  maxEventBytes: number,
): StreamReader {
  const splitter = new SseSplitter(maxEventBytes);
  let counts: TokenCounts | null = null;
  let model: string | null = null;
  const parts = emptyAnthropicParts();
  let anthropicSeen = false;
  let anthropicFinal = false;

  const noteModel = (m: unknown) => {
    if (model === null && typeof m === 'string' && m !== '') model = m;
  };

  const onOpenAIChat = (data: Record<string, unknown>) => {
    noteModel(data.model);
    if (isRecord(data.usage)) counts = normalizeOpenAIUsage(data.usage) ?? counts;
    if (!Array.isArray(data.choices)) return;
    for (const choice of data.choices) {
      if (!isRecord(choice)) continue;
      if (isRecord(choice.delta)) addDeltaText(choice.delta, output);
      if (typeof choice.text === 'string') output.add(choice.text); // legacy completions
    }
  };

  const onOpenAIResponses = (data: Record<string, unknown>) => {
    const type = typeof data.type === 'string' ? data.type : '';
    if (isRecord(data.response)) {
      noteModel(data.response.model);
      // completed, incomplete and failed all carry the final usage
      if (isRecord(data.response.usage)) counts = normalizeOpenAIUsage(data.response.usage) ?? counts;
    }
    if (type.endsWith('.delta') && !type.includes('audio') && typeof data.delta === 'string')
      output.add(data.delta);
  };

  const onAnthropic = (data: Record<string, unknown>) => {
    switch (data.type) {
      case 'message_start':
        if (isRecord(data.message)) {
          noteModel(data.message.model);
          anthropicSeen = mergeAnthropicUsage(parts, data.message.usage) || anthropicSeen;
        }
        break;
      case 'message_delta':
        // Cumulative counts: the latest value of each field wins.
        if (mergeAnthropicUsage(parts, data.usage)) {
          anthropicSeen = true;
          anthropicFinal = true;
        }
        break;
      case 'content_block_start':
        if (isRecord(data.content_block)) addAnthropicBlockText(data.content_block, output);
        break;
      case 'content_block_delta':
        if (isRecord(data.delta)) addAnthropicBlockText(data.delta, output);
        break;
      case 'completion': // legacy /v1/complete
        if (typeof data.completion === 'string') output.add(data.completion);
        noteModel(data.model);
        break;
    }
  };

  const onData = endpoint.startsWith('anthropic')
    ? onAnthropic
    : endpoint === 'openai-responses'
      ? onOpenAIResponses
      : onOpenAIChat;

  /**
   * The hot path: most events are text deltas. Those are read with addStringFields; only events that can
   * carry usage or the model (first event, usage chunk, message_start/delta, response.*) are JSON-parsed.
   */
  const isDeltaOnly = (event: string, data: string): boolean => {
    if (endpoint.startsWith('anthropic')) {
      if (event !== 'content_block_delta') return false;
      addStringFields(data, ANTHROPIC_TEXT_FIELDS, output);
      return true;
    }
    if (endpoint === 'openai-responses') {
      if (!event.endsWith('.delta')) return false;
      if (!event.includes('audio')) addStringFields(data, RESPONSES_TEXT_FIELDS, output);
      return true;
    }
    if (model === null || (data.includes('"usage"') && USAGE_OBJECT.test(data))) return false;
    addStringFields(data, OPENAI_TEXT_FIELDS, output);
    return true;
  };

  const onSegment = (segment: SseSegment) => {
    if (!segment.isEvent) return;
    const event = parseSseEvent(segment.raw);
    if (!event.hasData || event.data === '[DONE]') return;
    if (segment.clipped) {
      // Too big to parse whole: the usage object sits in the tail of these events.
      const usage = findUsageObject(event.data);
      noteModel(/"model"\s*:\s*"([^"\\]{1,200})"/.exec(event.data)?.[1]);
      if (endpoint.startsWith('anthropic')) {
        if (mergeAnthropicUsage(parts, usage)) anthropicSeen = true;
      } else counts = normalizeOpenAIUsage(usage) ?? counts;
      return;
    }
    if (isDeltaOnly(event.event, event.data)) return;
    let data: unknown;
    try {
      data = JSON.parse(event.data) as unknown;
    } catch {
      return; // a provider's odd event is not our failure
    }
    if (isRecord(data)) onData(data);
  };

  return {
    push(decoded) {
      splitter.push(decoded, onSegment);
    },
    end() {
      splitter.end(onSegment);
    },
    reported() {
      if (counts) return { counts, anthropic: null, model, final: true };
      if (anthropicSeen) return { counts: null, anthropic: parts, model, final: anthropicFinal };
      return { counts: null, anthropic: null, model, final: false };
    },
  };
}
