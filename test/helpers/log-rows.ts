import { newId } from '../../src/ids.js';
import { LOG_COLUMNS } from '../../src/store/log-query.js';
import { openConnection } from '../../src/store/sqlite/driver.js';
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
    tool_uses: null,
    ...rest,
    org_id: rest.org_id ?? rest.account_id ?? 'acct-1',
  };
}

/** The row as list endpoints return it: without headers and bodies. */
export function toSummary(r: RequestLogRow) {
  const { request_headers: _a, response_headers: _b, request_body: _c, response_body: _d, ...summary } = r;
  return summary;
}

/**
 * `n` copies of one row (ids made unique, everything else as `over` sets it) written into a SQLite log in one
 * statement: a long history in a second or two, where inserting row by row takes ~20 µs a row. The copies
 * are not in the full-text index.
 */
export function fillLog(path: string, n: number, over: Parameters<typeof makeLogRow>[0] = {}): void {
  const db = openConnection(path);
  const row = makeLogRow(over);
  const cols = LOG_COLUMNS.join(', ');
  db.prepare(`INSERT INTO requests (${cols}) VALUES (${LOG_COLUMNS.map(() => '?').join(', ')})`).run(
    ...LOG_COLUMNS.map((c) => {
      const v = row[c];
      if (typeof v === 'boolean') return v ? 1 : 0;
      if (v !== null && typeof v === 'object') return JSON.stringify(v);
      return v ?? null;
    }),
  );
  const copied = LOG_COLUMNS.map((c) => (c === 'id' ? `substr(id, 1, 16) || printf('%010d', i)` : c)).join(
    ', ',
  );
  db.exec(
    `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${n - 1})
     INSERT INTO requests (${cols}) SELECT ${copied} FROM n, requests WHERE requests.id = '${row.id}'`,
  );
  db.close();
}

/**
 * Rows as a keyrelay before organizations (log migration 13) wrote them, without `org_id`: one INSERT per
 * row for a database still on an older schema, with `?` (SQLite) or `$n` (PostgreSQL) placeholders.
 */
export function insertsBeforeOrgs(
  rows: readonly RequestLogRow[],
  dialect: 'sqlite' | 'pg',
): { sql: string; values: unknown[] }[] {
  // The log's columns before organizations (log migration 13) and tool uses (11).
  const cols = LOG_COLUMNS.filter((c) => c !== 'org_id' && c !== 'tool_uses');
  const marks = cols.map((_, i) => (dialect === 'sqlite' ? '?' : `$${i + 1}`)).join(', ');
  const sql = `INSERT INTO requests (${cols.join(', ')}) VALUES (${marks})`;
  return rows.map((row) => ({
    sql,
    values: cols.map((c) => {
      const v = row[c];
      if (typeof v === 'boolean') return dialect === 'sqlite' ? (v ? 1 : 0) : v;
      if (v !== null && typeof v === 'object') return JSON.stringify(v);
      return v ?? null;
    }),
  }));
}
