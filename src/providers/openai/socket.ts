/**
 * Reading OpenAI's WebSocket events as they pass (never changing them): which messages matter for
 * accounting, usage out of the end events, and bodies with base64 audio elided for the log.
 *   Realtime:            https://platform.openai.com/docs/api-reference/realtime-server-events
 *   Responses WS mode:   https://developers.openai.com/api/reference/resources/responses/websocket-events
 */
import type { Usage } from '../../usage/index.js';
import type { SocketEvents, SocketProtocol } from '../types.js';
import { responsesToolUses } from './tools.js';

function protocolOf(path: string): SocketProtocol {
  if (/^\/v1\/realtime(?:$|[/?])/.test(path)) return 'realtime';
  if (/^\/v1\/responses(?:$|[/?])/.test(path)) return 'responses';
  return 'other';
}

/** End events: one log row each. */
const END_EVENTS = new Set([
  'response.done', // Realtime
  'response.completed', // Responses WS
  'response.failed',
  'response.incomplete',
]);

const PEEK_CHARS = 160;
const TYPE_IN_PREFIX = /^\s*\{\s*"type"\s*:\s*"([^"\\]{1,80})"/;

/**
 * The type of a server event, from its first bytes: OpenAI writes `type` first, and this runs on every
 * message (audio deltas included), where a full parse would cost more than the relay itself.
 */
function peekServerType(data: Buffer): string | null {
  const m = TYPE_IN_PREFIX.exec(data.toString('latin1', 0, Math.min(data.length, PEEK_CHARS)));
  return m ? m[1]! : null;
}

/**
 * A caller's response.create, or null. Callers are not trusted to put `type` first, nor to spell it without
 * escapes: a message that could be one (names it, or holds any \u escape) is parsed in full, whatever its
 * size (ws bounds it), so the limits cannot be slipped past by reordering, escaping or padding; one that
 * does not parse is 'unreadable'.
 */
function parseClientCreate(data: Buffer): Record<string, unknown> | null | 'unreadable' {
  if (!data.includes('response.create') && !data.includes('\\u')) return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(data.toString('utf8'));
  } catch {
    return 'unreadable';
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return null;
  return (parsed as { type?: unknown }).type === 'response.create'
    ? (parsed as Record<string, unknown>)
    : null;
}

const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : null);
const obj = (v: unknown): Record<string, unknown> =>
  typeof v === 'object' && v !== null ? (v as Record<string, unknown>) : {};

/**
 * Usage as the end event reports it. Realtime: `input_token_details` {cached_tokens, audio_tokens,
 * cached_tokens_details.audio_tokens}, `output_token_details.audio_tokens`; Responses: `input_tokens_details`
 * .cached_tokens and `output_tokens_details.reasoning_tokens`. input/output are totals (audio included).
 */
function usageFromResponse(response: Record<string, unknown>, model: string | null): Usage {
  const u = obj(response.usage);
  const input = num(u.input_tokens);
  const output = num(u.output_tokens);
  const inDetails = obj(u.input_token_details ?? u.input_tokens_details);
  const outDetails = obj(u.output_token_details ?? u.output_tokens_details);
  const usage: Usage = {
    input_tokens: input,
    cache_read_tokens: num(inDetails.cached_tokens) ?? (input === null ? null : 0),
    cache_write_tokens: input === null ? null : 0,
    output_tokens: output,
    reasoning_tokens: num(outDetails.reasoning_tokens),
    source: input !== null && output !== null ? 'provider' : 'none',
    model: (typeof response.model === 'string' && response.model) || model,
  };
  const inAudio = num(inDetails.audio_tokens);
  const cachedAudio = num(obj(inDetails.cached_tokens_details).audio_tokens);
  const outAudio = num(outDetails.audio_tokens);
  if (inAudio !== null) usage.input_audio_tokens = inAudio;
  if (cachedAudio !== null) usage.cache_read_audio_tokens = cachedAudio;
  if (outAudio !== null) usage.output_audio_tokens = outAudio;
  const tools = responsesToolUses(response);
  if (tools) usage.tool_uses = tools;
  // Realtime's response.done and the Responses end events say how the response ended in `status`, as the
  // HTTP Responses API does (usage/response-tap reads the same for it).
  if (typeof response.status === 'string' && response.status) usage.finish_reasons = [response.status];
  return usage;
}

const BASE64ISH = /^[A-Za-z0-9+/=\r\n]*$/;
const ELIDE_MIN_CHARS = 128;
const AUDIO_KEYS = new Set(['audio', 'data', 'delta']);

/** JSON for the log with base64 audio replaced by a note of its size (audio would fill BODY_LOG_BYTES). */
function elideAudio(value: unknown): string {
  return JSON.stringify(value, (key, v: unknown) => {
    if (typeof v === 'string' && v.length >= ELIDE_MIN_CHARS && AUDIO_KEYS.has(key) && BASE64ISH.test(v)) {
      return `[base64 elided: ${Math.floor((v.length * 3) / 4)} bytes]`;
    }
    return v;
  });
}

/** keyrelay's refusal of one response.create, as an `error` event in the protocol's shape. */
function renderErrorEvent(
  protocol: SocketProtocol,
  code: string,
  message: string,
  status: number,
  clientEventId: string | null,
  eventId: string,
): string {
  if (protocol === 'responses') {
    return JSON.stringify({
      type: 'error',
      status,
      error: { type: 'keyrelay_error', code, message, param: null },
    });
  }
  return JSON.stringify({
    type: 'error',
    event_id: eventId,
    error: { type: 'keyrelay_error', code, message, param: null, event_id: clientEventId },
  });
}

function kindOf(type: string): ReturnType<SocketEvents['kindOf']> {
  if (type.endsWith('.delta')) return 'delta';
  if (type === 'session.created' || type === 'session.updated') return 'session';
  if (type === 'response.created') return 'created';
  if (END_EVENTS.has(type)) return 'end';
  if (type === 'error') return 'error';
  return null;
}

export const OPENAI_SOCKET: SocketEvents = {
  protocolOf,
  credentialSubprotocol: 'openai-insecure-api-key',
  peekServerType,
  kindOf,
  failed: (type, status) => type === 'response.failed' || status === 'failed',
  parseClientCreate,
  usageFromResponse,
  forLog: elideAudio,
  renderErrorEvent,
};
