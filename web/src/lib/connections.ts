/**
 * WebSocket rows in the request log: a socket has one row of its own (id = connection_id, written when it
 * closes) and one row per model response on it (method `WS`, same connection_id). The log lists rows
 * newest first; for display each socket's responses are nested under its row.
 */
export interface ConnectionFields {
  id: string;
  method: string;
  connection_id?: string | null;
}

export interface LogLine<T> {
  row: T;
  /** 'socket' for a socket's own row, 'response' for a response nested under it (or under a socket not on this page). */
  kind: 'plain' | 'socket' | 'response';
  /** Responses nested under this socket row (counted on this page). */
  responses: number;
}

export const isSocketRow = (r: ConnectionFields): boolean => !!r.connection_id && r.connection_id === r.id;

/**
 * Rows in log order, except that each response row whose socket row is on the page moves right under it.
 * Responses whose socket row is not on the page (still open, or on another page) stay where they are.
 */
export function groupByConnection<T extends ConnectionFields>(rows: readonly T[]): LogLine<T>[] {
  const sockets = new Set(rows.filter(isSocketRow).map((r) => r.id));
  const nested = new Map<string, T[]>();
  for (const r of rows) {
    if (!isSocketRow(r) && r.connection_id && sockets.has(r.connection_id)) {
      let list = nested.get(r.connection_id);
      if (!list) nested.set(r.connection_id, (list = []));
      list.push(r);
    }
  }
  const out: LogLine<T>[] = [];
  for (const r of rows) {
    if (isSocketRow(r)) {
      const children = nested.get(r.id) ?? [];
      out.push({ row: r, kind: 'socket', responses: children.length });
      for (const c of children) out.push({ row: c, kind: 'response', responses: 0 });
    } else if (r.connection_id) {
      if (!sockets.has(r.connection_id)) out.push({ row: r, kind: 'response', responses: 0 });
    } else out.push({ row: r, kind: 'plain', responses: 0 });
  }
  return out;
}

/** The close code's meaning (RFC 6455 §7.4.1), for people reading the log. */
export function closeCodeText(code: number | null | undefined): string {
  if (code === null || code === undefined) return '—';
  const names: Record<number, string> = {
    1000: 'normal',
    1001: 'going away',
    1005: 'no status',
    1006: 'dropped',
    1008: 'policy',
    1009: 'message too big',
    1011: 'server error',
  };
  return names[code] ? `${code} (${names[code]})` : String(code);
}
