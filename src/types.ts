/** One row of the request log. Field names are the contract the CLI and console API expose. */
import type { Provider } from './providers/ids.js';
import type { CostBreakdown, CostLine, UsageSource } from './usage/index.js';

export type { CostBreakdown, CostLine, Provider, UsageSource };
export type Outcome = 'ok' | 'upstream_error' | 'client_aborted' | 'timeout' | 'refused';

export interface RequestLogRow {
  id: string; // = x-keyrelay-request-id (ULID-like, time-sortable)
  created_at: string; // ISO-8601 UTC, when the request arrived
  key_id: string;
  /** The member who holds the key (src/orgs/: an account's personal organization has the account's id). */
  account_id: string;
  /** The organization that owns the key, and so the row. */
  org_id: string;
  provider: Provider;
  method: string;
  path: string; // upstream path + query, as forwarded (e.g. /v1/chat/completions)
  model: string | null;
  stream: boolean;
  status: number; // status the caller received (0 if none was sent, e.g. aborted before headers)
  outcome: Outcome;
  error_code: string | null; // keyrelay error code when keyrelay refused/failed
  latency_ms: number; // arrival → last byte sent (or abort)
  ttfb_ms: number | null; // arrival → first upstream body byte
  input_tokens: number | null; // all prompt tokens, cache reads + writes included
  cache_read_tokens: number | null;
  cache_write_tokens: number | null;
  output_tokens: number | null;
  reasoning_tokens: number | null;
  usage_source: UsageSource;
  /**
   * Server-side tool uses billed apart from tokens, by fee (`web_searches`, `code_interpreter_containers`…),
   * as the provider reported them; null when none ran. Kept so a later price can be applied to them.
   */
  tool_uses?: Record<string, number> | null;
  cost_usd: number | null;
  price_source: string | null; // e.g. "genai-prices@0.1.8"
  end_user: string | null;
  session: string | null;
  properties: Record<string, string>;
  request_bytes: number;
  response_bytes: number;
  request_headers: Record<string, string>; // redacted: credentials never appear
  response_headers: Record<string, string>;
  request_body: string | null; // up to KEYRELAY_BODY_LOG_BYTES, null when not kept
  response_body: string | null; // decoded (decompressed) text, truncated likewise
  request_body_truncated: boolean;
  response_body_truncated: boolean;
  /**
   * What search reads of a streamed response instead of its SSE frames: the first event (ids, model) and
   * the text the model streamed, as far as the logged body goes (to the chunk) and within its limit. Null
   * for every other response (search reads the body). Never returned by the API.
   */
  response_search_text?: string | null;
  client_ip: string | null;
  user_agent: string | null;
  credential_fingerprint: string | null; // HMAC of the provider credential, never the credential
  // WebSocket rows (docs/websockets.md); optional so HTTP rows need not name them (stored as null).
  /** The socket's own row id, on the socket row and on each of its response rows. */
  connection_id?: string | null;
  input_audio_tokens?: number | null; // of input_tokens, audio (cached audio included)
  cache_read_audio_tokens?: number | null; // of cache_read_tokens, audio
  output_audio_tokens?: number | null; // of output_tokens, audio
  ws_messages_in?: number | null; // socket row: messages caller → upstream
  ws_messages_out?: number | null; // socket row: messages upstream → caller
  ws_close_code?: number | null; // socket row: the close code the socket ended with
  ws_close_reason?: string | null;
  error_message: string | null; // what keyrelay told the caller when it refused or failed (with error_code)
}
