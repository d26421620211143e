import { newId } from '../../src/ids.js';
import type { RequestLogRow } from '../../src/types.js';

/** A complete, realistic log row; every field can be overridden. */
export function makeLogRow(over: Partial<RequestLogRow> & { at?: number } = {}): RequestLogRow {
  const { at = Date.parse('2026-03-01T10:00:00.000Z'), ...rest } = over;
  return {
    id: newId(at),
    created_at: new Date(at).toISOString(),
    key_id: 'key-1',
    account_id: 'acct-1',
    provider: 'openai',
    method: 'POST',
    path: '/v1/chat/completions',
    model: 'gpt-4o-mini',
    stream: true,
    status: 200,
    outcome: 'ok',
    error_code: null,
    latency_ms: 1234,
    ttfb_ms: 321,
    input_tokens: 120,
    cache_read_tokens: 100,
    cache_write_tokens: 0,
    output_tokens: 45,
    reasoning_tokens: null,
    usage_source: 'provider',
    cost_usd: 0.000123456789,
    price_source: 'genai-prices@0.1.8',
    end_user: 'user-42',
    session: 'sess-7',
    properties: { env: 'prod', 'team.name': 'a "quoted" team' },
    request_bytes: 512,
    response_bytes: 2048,
    request_headers: { 'content-type': 'application/json', 'user-agent': 'OpenAI/JS 6.0' },
    response_headers: { 'content-type': 'text/event-stream' },
    request_body: '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"héllo ✓"}]}',
    response_body: 'data: {"choices":[]}\n\ndata: [DONE]\n\n',
    request_body_truncated: false,
    response_body_truncated: true,
    client_ip: '127.0.0.1',
    user_agent: 'OpenAI/JS 6.0',
    credential_fingerprint: 'fp-abc',
    connection_id: null,
    input_audio_tokens: null,
    cache_read_audio_tokens: null,
    output_audio_tokens: null,
    ws_messages_in: null,
    ws_messages_out: null,
    ws_close_code: null,
    ws_close_reason: null,
    error_message: null,
    ...rest,
  };
}

/** The row as list endpoints return it: without headers and bodies. */
export function toSummary(r: RequestLogRow) {
  const { request_headers: _a, response_headers: _b, request_body: _c, response_body: _d, ...summary } = r;
  return summary;
}
