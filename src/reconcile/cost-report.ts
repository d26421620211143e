/**
 * Reading a provider's own cost report for one UTC day, as each documents it:
 * - OpenAI: `GET /v1/organization/costs` (start_time/end_time in Unix seconds, bucket_width=1d,
 *   group_by=line_item; `Authorization: Bearer` admin key). A result's `amount.value` is in the currency's
 *   units; `line_item` reads "<model>, <kind>" for model usage (e.g. "gpt-4o-mini-2024-07-18, input").
 * - Anthropic: `GET /v1/organizations/cost_report` (starting_at/ending_at RFC 3339, bucket_width=1d,
 *   group_by[]=description; `x-api-key` admin key, `anthropic-version`). A result's `amount` is a decimal
 *   string in the currency's lowest units (cents); `model` names the model of token costs.
 * Both page with `has_more` and `next_page` (sent back as `page`). Each page is retried on 429, 5xx and
 * network failure with backoff (Retry-After honoured, capped), and the whole read is bounded in pages, so
 * a report that pages forever or a server that never answers ends in a clear error.
 */
import { request } from 'undici';
import type { AdminKeys, BillingProvider } from './admin-keys.js';

/** One line of the bill: what the provider charged for a model (or a line item without one) that day. */
export interface BillLine {
  /** The model the line bills, as the provider names it; null for a line not tied to a model. */
  model: string | null;
  /** The provider's own words for the line (OpenAI's line_item, Anthropic's description or cost_type). */
  item: string;
  cost_usd: number;
}

export interface FetchBounds {
  /** One page's deadline, headers and body. */
  timeoutMs: number;
  /** Tries per page (the first included). */
  attempts: number;
  /** The first retry's wait; each next one doubles. */
  backoffMs: number;
  /** Pages read at most: a day's report is a few pages; more means the cursor does not end. */
  maxPages: number;
}

/**
 * A page is small and the admin APIs answer in about a second; 15 s leaves room for a slow day's report.
 * Three tries with 1 s, 2 s between them ride out a short 429 or 5xx; the CLI waits at most a minute or so.
 */
export const DEFAULT_FETCH_BOUNDS: FetchBounds = {
  timeoutMs: 15_000,
  attempts: 3,
  backoffMs: 1_000,
  maxPages: 50,
};
/** A Retry-After longer than this is not waited for: the read fails and says so. */
const MAX_RETRY_AFTER_MS = 30_000;
const ANTHROPIC_VERSION = '2023-06-01';

/** Why a provider's report could not be read, in words for the operator (never with the key). */
export class CostReportError extends Error {
  override name = 'CostReportError';
}

interface PageRequest {
  url: URL;
  headers: Record<string, string>;
}

interface Page {
  lines: BillLine[];
  next: string | null;
}

export async function fetchCostReport(
  provider: BillingProvider,
  origin: string,
  keys: AdminKeys,
  day: string,
  bounds: FetchBounds = DEFAULT_FETCH_BOUNDS,
): Promise<BillLine[]> {
  const start = new Date(`${day}T00:00:00.000Z`);
  const end = new Date(start.getTime() + 86_400_000);
  const lines: BillLine[] = [];
  let page: string | null = null;
  for (let n = 0; n < bounds.maxPages; n++) {
    const req = keys.withKey(provider, (key) =>
      provider === 'openai'
        ? openaiPage(origin, key, start, end, page)
        : anthropicPage(origin, key, start, end, page),
    );
    if (!req)
      throw new CostReportError(
        `no admin key: set ${provider === 'openai' ? 'OPENAI_ADMIN_KEY' : 'ANTHROPIC_ADMIN_KEY'}`,
      );
    const body = await fetchPage(provider, req, bounds, keys);
    const parsed = provider === 'openai' ? readOpenaiPage(body) : readAnthropicPage(body);
    lines.push(...parsed.lines);
    if (parsed.next === null) return lines;
    page = parsed.next;
  }
  throw new CostReportError(
    `${label(provider)}'s cost report did not end after ${bounds.maxPages} pages (has_more stayed true)`,
  );
}

function openaiPage(origin: string, key: string, start: Date, end: Date, page: string | null): PageRequest {
  const url = new URL('/v1/organization/costs', origin);
  url.searchParams.set('start_time', String(start.getTime() / 1000));
  url.searchParams.set('end_time', String(end.getTime() / 1000));
  url.searchParams.set('bucket_width', '1d');
  url.searchParams.set('group_by', 'line_item');
  if (page !== null) url.searchParams.set('page', page);
  return { url, headers: { authorization: `Bearer ${key}`, accept: 'application/json' } };
}

function anthropicPage(
  origin: string,
  key: string,
  start: Date,
  end: Date,
  page: string | null,
): PageRequest {
  const url = new URL('/v1/organizations/cost_report', origin);
  url.searchParams.set('starting_at', start.toISOString());
  url.searchParams.set('ending_at', end.toISOString());
  url.searchParams.set('bucket_width', '1d');
  url.searchParams.append('group_by[]', 'description');
  if (page !== null) url.searchParams.set('page', page);
  return {
    url,
    headers: { 'x-api-key': key, 'anthropic-version': ANTHROPIC_VERSION, accept: 'application/json' },
  };
}

const label = (p: BillingProvider) => (p === 'openai' ? 'OpenAI' : 'Anthropic');
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function fetchPage(
  provider: BillingProvider,
  req: PageRequest,
  bounds: FetchBounds,
  keys: AdminKeys,
): Promise<unknown> {
  let last = '';
  for (let attempt = 1; attempt <= bounds.attempts; attempt++) {
    let wait = bounds.backoffMs * 2 ** (attempt - 1);
    try {
      // Never followed: a redirect would carry the admin key to another origin.
      const res = await request(req.url, {
        headers: req.headers,
        signal: AbortSignal.timeout(bounds.timeoutMs),
      });
      const text = await res.body.text();
      const ok = res.statusCode >= 200 && res.statusCode < 300;
      if (ok) {
        try {
          return JSON.parse(text) as unknown;
        } catch {
          throw new CostReportError(
            `${label(provider)}'s cost report answered ${res.statusCode} with a body that is not JSON`,
          );
        }
      }
      last = `HTTP ${res.statusCode}${providerMessage(text)}`;
      if (res.statusCode !== 429 && res.statusCode < 500)
        throw new CostReportError(keys.redact(`${label(provider)}'s cost report refused: ${last}`));
      const header = res.headers['retry-after'];
      const after = retryAfterMs(typeof header === 'string' ? header : null);
      if (after !== null) {
        if (after > MAX_RETRY_AFTER_MS)
          throw new CostReportError(
            `${label(provider)}'s cost report answered ${res.statusCode} and asked to wait ${Math.ceil(after / 1000)} s; try again later`,
          );
        wait = Math.max(wait, after);
      }
    } catch (err) {
      if (err instanceof CostReportError) throw err;
      last =
        err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError')
          ? `no answer within ${bounds.timeoutMs / 1000} s`
          : `could not connect (${err instanceof Error ? (causeCode(err) ?? err.message) : String(err)})`;
    }
    if (attempt < bounds.attempts) await sleep(wait);
  }
  throw new CostReportError(
    keys.redact(`${label(provider)}'s cost report failed after ${bounds.attempts} tries: ${last}`),
  );
}

function causeCode(err: Error): string | undefined {
  const cause = (err as { cause?: unknown }).cause;
  return cause instanceof Error ? ((cause as { code?: string }).code ?? cause.message) : undefined;
}

/** Both providers' error bodies carry `error.message`; shown so the operator sees why (a wrong key, say). */
function providerMessage(text: string): string {
  try {
    const body = JSON.parse(text) as { error?: { message?: unknown } };
    const m = body.error?.message;
    return typeof m === 'string' && m !== '' ? `: ${m.slice(0, 300)}` : '';
  } catch {
    return '';
  }
}

function retryAfterMs(value: string | null): number | null {
  if (value === null) return null;
  if (/^\d+(\.\d+)?$/.test(value.trim())) return Number(value) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, at - Date.now());
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null;

function pageEnvelope(provider: BillingProvider, body: unknown): { data: unknown[]; next: string | null } {
  // data and has_more are required: a body without them must not read as a day that cost nothing.
  if (!isObject(body) || !Array.isArray(body.data) || typeof body.has_more !== 'boolean')
    throw new CostReportError(
      `${label(provider)}'s cost report is not in the documented shape (data, has_more)`,
    );
  if (!body.has_more) return { data: body.data, next: null };
  if (typeof body.next_page !== 'string' || body.next_page === '')
    throw new CostReportError(`${label(provider)}'s cost report says has_more but gives no next_page`);
  return { data: body.data, next: body.next_page };
}

function readOpenaiPage(body: unknown): Page {
  const { data, next } = pageEnvelope('openai', body);
  const lines: BillLine[] = [];
  for (const bucket of data) {
    if (!isObject(bucket) || !Array.isArray(bucket.results)) continue;
    for (const r of bucket.results) {
      if (!isObject(r) || !isObject(r.amount)) continue;
      const value = Number(r.amount.value);
      const currency = typeof r.amount.currency === 'string' ? r.amount.currency.toLowerCase() : 'usd';
      if (!Number.isFinite(value)) continue;
      if (currency !== 'usd')
        throw new CostReportError(`OpenAI's cost report is in ${currency}; keyrelay compares USD only`);
      const item = typeof r.line_item === 'string' ? r.line_item : 'all usage';
      lines.push({ model: openaiLineModel(item), item, cost_usd: value });
    }
  }
  return { lines, next };
}

/** "gpt-4o-mini-2024-07-18, cached input" → the model; a line item without ", " names no model. */
function openaiLineModel(item: string): string | null {
  const comma = item.lastIndexOf(', ');
  return comma > 0 ? item.slice(0, comma) : null;
}

function readAnthropicPage(body: unknown): Page {
  const { data, next } = pageEnvelope('anthropic', body);
  const lines: BillLine[] = [];
  for (const bucket of data) {
    if (!isObject(bucket) || !Array.isArray(bucket.results)) continue;
    for (const r of bucket.results) {
      if (!isObject(r)) continue;
      const cents = Number(r.amount);
      const currency = typeof r.currency === 'string' ? r.currency.toUpperCase() : 'USD';
      if (typeof r.amount !== 'string' || !Number.isFinite(cents)) continue;
      if (currency !== 'USD')
        throw new CostReportError(`Anthropic's cost report is in ${currency}; keyrelay compares USD only`);
      const model = typeof r.model === 'string' && r.model !== '' ? r.model : null;
      const item =
        typeof r.description === 'string'
          ? r.description
          : typeof r.cost_type === 'string'
            ? r.cost_type
            : 'all usage';
      lines.push({ model, item, cost_usd: cents / 100 });
    }
  }
  return { lines, next };
}
