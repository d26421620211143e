/**
 * The request log out, as CSV or NDJSON (README, "Export"): the rows a filter selects, newest first, read a
 * page at a time by id (the same keyset pages as the console's list), so memory stays the same whether an
 * export holds ten rows or ten million. Each row carries the list's fields (no headers or bodies).
 */
import { SUMMARY_COLUMNS } from '../store/log-query.js';
import type { LogStore, RequestFilter, RequestSummary } from '../store/types.js';

export type ExportFormat = 'csv' | 'ndjson';
export const EXPORT_FORMATS = ['csv', 'ndjson'] as const satisfies readonly ExportFormat[];

export const EXPORT_CONTENT_TYPES: Record<ExportFormat, string> = {
  csv: 'text/csv; charset=utf-8',
  ndjson: 'application/x-ndjson; charset=utf-8',
};

/** The columns of an export, in this order: the list's fields (store/log-query.ts, which leaves out the rest). */
export const EXPORT_COLUMNS = SUMMARY_COLUMNS as readonly (keyof RequestSummary)[];

/**
 * Rows read per page: enough that a page's query is cheap per row, few enough that a page (rows without
 * bodies, about 1 KB each) stays a fraction of a megabyte in memory.
 */
const EXPORT_PAGE_ROWS = 500;

/** The rows `filter` selects, newest first; at most `limit` when given. */
export async function* exportRows(
  store: Pick<LogStore, 'listRequests'>,
  filter: RequestFilter,
  limit?: number,
): AsyncGenerator<RequestSummary[]> {
  let left = limit ?? Infinity;
  let cursor: string | null = null;
  while (left > 0) {
    const page = await store.listRequests(filter, { limit: Math.min(EXPORT_PAGE_ROWS, left), cursor });
    const items = page.items.length > left ? page.items.slice(0, left) : page.items;
    left -= items.length;
    if (items.length > 0) yield items;
    if (!page.next_cursor) return;
    cursor = page.next_cursor;
  }
}

/**
 * The export as text, a page of lines per piece: CSV (RFC 4180, CRLF, a header row, a UTF-8 byte-order mark
 * so spreadsheets read it as UTF-8) or NDJSON (one JSON object per line).
 */
export async function* exportText(
  store: Pick<LogStore, 'listRequests'>,
  filter: RequestFilter,
  format: ExportFormat,
  limit?: number,
): AsyncGenerator<string> {
  if (format === 'csv') yield '\uFEFF' + csvLine(EXPORT_COLUMNS);
  for await (const rows of exportRows(store, filter, limit)) {
    let text = '';
    for (const row of rows) text += format === 'csv' ? csvRow(row) : ndjsonRow(row);
    yield text;
  }
}

function ndjsonRow(row: RequestSummary): string {
  const out: Record<string, unknown> = {};
  for (const c of EXPORT_COLUMNS) out[c] = row[c] ?? null;
  // JSON.stringify escapes U+2028/2029 and control characters, so a value never breaks its line.
  return JSON.stringify(out) + '\n';
}

function csvRow(row: RequestSummary): string {
  return csvLine(EXPORT_COLUMNS.map((c) => row[c]));
}

function csvLine(values: readonly unknown[]): string {
  return values.map(csvCell).join(',') + '\r\n';
}

/** Characters a spreadsheet takes, first in a cell, as the start of a formula (OWASP "CSV Injection"). */
const FORMULA_START = /^[=+\-@\t\r]/;
const NEEDS_QUOTES = /[",\r\n]|^\s|\s$/;

/**
 * One CSV field. Numbers and booleans as written; objects (properties) as JSON; text that a spreadsheet would
 * run as a formula gets a leading `'`, which shows the value as text
 * (https://owasp.org/www-community/attacks/CSV_Injection).
 */
export function csvCell(v: unknown): string {
  if (v === null || v === undefined) return '';
  if (typeof v === 'number') return Number.isFinite(v) ? String(v) : '';
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  let s = typeof v === 'string' ? v : JSON.stringify(v);
  if (FORMULA_START.test(s)) s = `'${s}`;
  return NEEDS_QUOTES.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}
