/** Anthropic's usage objects and SSE events (Messages, legacy Complete). */
import { addAnthropicBlockText, type OutputCounter } from '../../usage/estimate.js';
import { findUsageObject, isRecord, modelInHead, num, sub, type TokenCounts } from '../../usage/normalize.js';
import { addStringFields } from '../../usage/stream-reader.js';
import type { Reported, SseEventReader, UsageReader } from '../types.js';

/** Anthropic parts as reported (input_tokens excludes cache reads and writes there). */
export interface AnthropicParts {
  input: number | null;
  cacheWrite: number | null;
  /** `cache_creation.ephemeral_1h_input_tokens`: the part of cacheWrite with the 1-hour TTL. */
  cacheWrite1h: number | null;
  cacheRead: number | null;
  output: number | null;
}

export function emptyAnthropicParts(): AnthropicParts {
  return { input: null, cacheWrite: null, cacheWrite1h: null, cacheRead: null, output: null };
}

/** Merge a (possibly partial, cumulative) Anthropic usage object into the parts seen so far. */
export function mergeAnthropicUsage(into: AnthropicParts, u: unknown): boolean {
  if (!isRecord(u)) return false;
  let seen = false;
  const take = (key: keyof AnthropicParts, v: unknown) => {
    const n = num(v);
    if (n !== null) {
      into[key] = n;
      seen = true;
    }
  };
  take('input', u.input_tokens);
  take('cacheWrite', u.cache_creation_input_tokens);
  take('cacheWrite1h', sub(u.cache_creation, 'ephemeral_1h_input_tokens'));
  take('cacheRead', u.cache_read_input_tokens);
  take('output', u.output_tokens);
  return seen;
}

/** Our counts: input_tokens counts every prompt token (input + cache writes + cache reads). */
export function anthropicCounts(parts: AnthropicParts): TokenCounts {
  const cacheWrite = parts.cacheWrite ?? 0;
  const cacheRead = parts.cacheRead ?? 0;
  const cacheWrite1h = Math.min(parts.cacheWrite1h ?? 0, cacheWrite);
  return {
    input_tokens: parts.input === null ? null : parts.input + cacheWrite + cacheRead,
    cache_read_tokens: cacheRead,
    cache_write_tokens: cacheWrite,
    ...(cacheWrite1h > 0 ? { cache_write_1h_tokens: cacheWrite1h } : {}),
    output_tokens: parts.output,
    reasoning_tokens: null, // Anthropic counts thinking inside output_tokens and does not split it out
  };
}

const TEXT_FIELDS = /"(?:text|thinking|partial_json)"\s*:\s*"/g;

/**
 * message_start carries input and a placeholder output count; message_delta the cumulative final counts.
 * A stream cut before message_delta is `partial` (the usage layer then takes the larger of the reported
 * and the streamed-text output).
 */
class MessagesStream implements SseEventReader {
  private readonly parts = emptyAnthropicParts();
  private seen = false;
  private final = false;
  private model: string | null = null;
  constructor(private readonly output: OutputCounter) {}

  private noteModel(m: unknown): void {
    if (this.model === null && typeof m === 'string' && m !== '') this.model = m;
  }

  skim(event: string, data: string): boolean {
    if (event !== 'content_block_delta') return false;
    addStringFields(data, TEXT_FIELDS, this.output);
    return true;
  }

  onEvent(data: Record<string, unknown>): void {
    switch (data.type) {
      case 'message_start':
        if (isRecord(data.message)) {
          this.noteModel(data.message.model);
          this.seen = mergeAnthropicUsage(this.parts, data.message.usage) || this.seen;
        }
        break;
      case 'message_delta':
        // Cumulative counts: the latest value of each field wins.
        if (mergeAnthropicUsage(this.parts, data.usage)) {
          this.seen = true;
          this.final = true;
        }
        break;
      case 'content_block_start':
        if (isRecord(data.content_block)) addAnthropicBlockText(data.content_block, this.output);
        break;
      case 'content_block_delta':
        if (isRecord(data.delta)) addAnthropicBlockText(data.delta, this.output);
        break;
      case 'completion': // legacy /v1/complete
        if (typeof data.completion === 'string') this.output.add(data.completion);
        this.noteModel(data.model);
        break;
    }
  }

  onClipped(data: string): void {
    this.noteModel(modelInHead(data));
    if (mergeAnthropicUsage(this.parts, findUsageObject(data))) this.seen = true;
  }

  reported(): Reported {
    return { counts: this.seen ? anthropicCounts(this.parts) : null, model: this.model, final: this.final };
  }
}

export const MESSAGES_USAGE: UsageReader = {
  json(usage) {
    const parts = emptyAnthropicParts();
    const seen = mergeAnthropicUsage(parts, usage);
    return { counts: seen ? anthropicCounts(parts) : null, final: seen };
  },
  sse: (o) => new MessagesStream(o),
  generatesOutput: true,
};
