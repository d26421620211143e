/** Anthropic's usage objects and SSE events (Messages, legacy Complete). */
import {
  addAnthropicBlockText,
  addStringFields,
  findUsageObject,
  isRecord,
  modelInHead,
  noteFinishReason,
  num,
  type OutputCounter,
  type Reported,
  type SseEventReader,
  sub,
  type TokenCounts,
  type ToolUses,
  type UsageReader,
} from '../../usage/index.js';

/** Anthropic parts as reported (input_tokens excludes cache reads and writes there). */
export interface AnthropicParts {
  input: number | null;
  cacheWrite: number | null;
  /** `cache_creation.ephemeral_1h_input_tokens`: the part of cacheWrite with the 1-hour TTL. */
  cacheWrite1h: number | null;
  cacheRead: number | null;
  output: number | null;
  /** `server_tool_use`: each `<tool>_requests` count, cumulative like the rest. */
  serverTools: ToolUses;
  /** The response ran code in a container (its `container` member), billed by container time. */
  container: boolean;
}

export function emptyAnthropicParts(): AnthropicParts {
  return {
    input: null,
    cacheWrite: null,
    cacheWrite1h: null,
    cacheRead: null,
    output: null,
    serverTools: {},
    container: false,
  };
}

/**
 * `usage.server_tool_use` counts (https://docs.anthropic.com/en/api/messages: `web_search_requests`,
 * `web_fetch_requests`) as fees. A count the API adds later is kept under its own name, so it shows as a
 * fee without a price rather than vanishing.
 */
const SERVER_TOOL_FEES: Readonly<Record<string, string>> = {
  web_search_requests: 'web_searches',
  web_fetch_requests: 'web_fetches',
};

function mergeServerToolUse(into: ToolUses, u: unknown): boolean {
  if (!isRecord(u)) return false;
  let seen = false;
  for (const [field, value] of Object.entries(u)) {
    const n = num(value);
    if (n === null || !field.endsWith('_requests')) continue;
    const fee = SERVER_TOOL_FEES[field] ?? field;
    if (n > 0) into[fee] = n;
    else delete into[fee];
    seen = true;
  }
  return seen;
}

/**
 * A message's `container` (code execution, skills): Anthropic bills the container's running time, which
 * the response does not report, so the call counts one container use.
 * https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/code-execution-tool#usage-and-pricing
 */
export function noteAnthropicContainer(into: AnthropicParts, container: unknown): void {
  if (isRecord(container) && typeof container.id === 'string') into.container = true;
}

/** Merge a (possibly partial, cumulative) Anthropic usage object into the parts seen so far. */
export function mergeAnthropicUsage(into: AnthropicParts, u: unknown): boolean {
  if (!isRecord(u)) return false;
  let seen = false;
  const take = (key: 'input' | 'cacheWrite' | 'cacheWrite1h' | 'cacheRead' | 'output', v: unknown) => {
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
  if (mergeServerToolUse(into.serverTools, u.server_tool_use)) seen = true;
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
    ...toolUses(parts),
  };
}

function toolUses(parts: AnthropicParts): { tool_uses?: ToolUses } {
  const uses: ToolUses = { ...parts.serverTools };
  if (parts.container) uses.code_execution_containers = 1;
  return Object.keys(uses).length > 0 ? { tool_uses: uses } : {};
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
  private readonly reasons: string[] = [];
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
          noteAnthropicContainer(this.parts, data.message.container);
        }
        break;
      case 'message_delta':
        if (isRecord(data.delta)) {
          noteAnthropicContainer(this.parts, data.delta.container);
          noteFinishReason(this.reasons, data.delta.stop_reason, 0);
        }
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
    return {
      counts: this.seen ? anthropicCounts(this.parts) : null,
      model: this.model,
      final: this.final,
      finishReasons: this.reasons.length > 0 ? this.reasons : undefined,
    };
  }
}

export const MESSAGES_USAGE: UsageReader = {
  json(usage, body) {
    const parts = emptyAnthropicParts();
    const seen = mergeAnthropicUsage(parts, usage);
    noteAnthropicContainer(parts, body?.container);
    return { counts: seen ? anthropicCounts(parts) : null, final: seen };
  },
  bodyMembers: ['container', 'stop_reason'],
  finishReasons(body) {
    const reasons: string[] = [];
    noteFinishReason(reasons, body.stop_reason);
    return reasons;
  },
  sse: (o) => new MessagesStream(o),
  generatesOutput: true,
};
