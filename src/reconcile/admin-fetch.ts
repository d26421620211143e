/**
 * Reading one of a provider's organization reports (its cost report, its usage report) page by page, as
 * both providers document them: each page is `{data, has_more, next_page}`, and the next one is asked for
 * with `page=<next_page>`. Each page is retried on 429, 5xx and network failure with backoff (Retry-After
 * honoured, capped); the whole read is bounded in pages and in time, so a report that pages forever, a
 * server that keeps failing or one that never answers ends in a clear error. The admin key is handed to one
 * request at a time, a redirect is never followed (it would carry the key elsewhere), and every message is
 * passed through the key's redaction.
 */
import { request } from 'undici';
import type { AdminKeys, BillingProvider } from './admin-keys.js';

export interface FetchBounds {
  /** One page's deadline, headers and body. */
  timeoutMs: number;
  /** Tries per page (the first included). */
  attempts: number;
  /** The first retry's wait; each next one doubles. */
  backoffMs: number;
  /** Pages read at most: a day's report is a few pages; more means the cursor does not end. */
  maxPages: number;
  /** The whole read (every page, every retry and wait) ends by then. */
  deadlineMs: number;
}

/**
 * A page is small and the admin APIs answer in about a second; 15 s leaves room for a slow day's report.
 * Three tries with 1 s, 2 s between them ride out a short 429 or 5xx. Two minutes for a whole report keeps
 * the CLI and the console page from waiting longer than someone would at a terminal.
 */
export const DEFAULT_FETCH_BOUNDS: FetchBounds = {
  timeoutMs: 15_000,
  attempts: 3,
  backoffMs: 1_000,
  maxPages: 50,
  deadlineMs: 120_000,
};
/** A Retry-After longer than this is not waited for: the read fails and says so. */
const MAX_RETRY_AFTER_MS = 30_000;
export const ANTHROPIC_VERSION = '2023-06-01';

/** Why a provider's report could not be read, in words for the operator (never with the key). */
export class ReportError extends Error {
  override name = 'ReportError';
}

export interface PageRequest {
  url: URL;
  headers: Record<string, string>;
}

export interface ReportSpec<T> {
  provider: BillingProvider;
  /** How messages name the report: "cost report", "usage report". */
  name: string;
  /** The request for one page (the first with `page` null), made with the key. */
  request(key: string, page: string | null): PageRequest;
  /** The items of one page's `data` (its buckets). */
  read(data: unknown[]): T[];
}

export const providerLabel = (p: BillingProvider) => (p === 'openai' ? 'OpenAI' : 'Anthropic');
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** The request headers each provider's admin API documents, with the admin key. */
export function adminHeaders(provider: BillingProvider, key: string): Record<string, string> {
  return provider === 'openai'
    ? { authorization: `Bearer ${key}`, accept: 'application/json' }
    : { 'x-api-key': key, 'anthropic-version': ANTHROPIC_VERSION, accept: 'application/json' };
}

/** Every page of a report, within `bounds`. */
export async function readReport<T>(spec: ReportSpec<T>, keys: AdminKeys, bounds: FetchBounds): Promise<T[]> {
  const what = `${providerLabel(spec.provider)}'s ${spec.name}`;
  const deadline = Date.now() + bounds.deadlineMs;
  const items: T[] = [];
  let page: string | null = null;
  for (let n = 0; n < bounds.maxPages; n++) {
    const req = keys.withKey(spec.provider, (key) => spec.request(key, page));
    if (!req)
      throw new ReportError(
        `no admin key: set ${spec.provider === 'openai' ? 'OPENAI_ADMIN_KEY' : 'ANTHROPIC_ADMIN_KEY'}`,
      );
    const body = await fetchPage(what, req, bounds, deadline, keys);
    const { data, next } = pageEnvelope(what, body);
    items.push(...spec.read(data));
    if (next === null) return items;
    page = next;
  }
  throw new ReportError(`${what} did not end after ${bounds.maxPages} pages (has_more stayed true)`);
}

async function fetchPage(
  what: string,
  req: PageRequest,
  bounds: FetchBounds,
  deadline: number,
  keys: AdminKeys,
): Promise<unknown> {
  let last = '';
  const late = () =>
    new ReportError(
      keys.redact(
        `${what} did not finish within ${bounds.deadlineMs / 1000} s${last ? ` (last: ${last})` : ''}`,
      ),
    );
  for (let attempt = 1; attempt <= bounds.attempts; attempt++) {
    let wait = bounds.backoffMs * 2 ** (attempt - 1);
    const left = deadline - Date.now();
    if (left <= 0) throw late();
    const timeout = Math.min(bounds.timeoutMs, left);
    try {
      // Never followed: a redirect would carry the admin key to another origin.
      const res = await request(req.url, { headers: req.headers, signal: AbortSignal.timeout(timeout) });
      const text = await res.body.text();
      if (res.statusCode >= 200 && res.statusCode < 300) {
        try {
          return JSON.parse(text) as unknown;
        } catch {
          throw new ReportError(`${what} answered ${res.statusCode} with a body that is not JSON`);
        }
      }
      last = `HTTP ${res.statusCode}${providerMessage(text)}`;
      if (res.statusCode !== 429 && res.statusCode < 500)
        throw new ReportError(keys.redact(`${what} refused: ${last}`));
      const header = res.headers['retry-after'];
      const after = retryAfterMs(typeof header === 'string' ? header : null);
      if (after !== null) {
        if (after > MAX_RETRY_AFTER_MS)
          throw new ReportError(
            `${what} answered ${res.statusCode} and asked to wait ${Math.ceil(after / 1000)} s; try again later`,
          );
        wait = Math.max(wait, after);
      }
    } catch (err) {
      if (err instanceof ReportError) throw err;
      last =
        err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError')
          ? `no answer within ${timeout / 1000} s`
          : `could not connect (${err instanceof Error ? (causeCode(err) ?? err.message) : String(err)})`;
      if (timeout < bounds.timeoutMs) throw late();
    }
    if (attempt < bounds.attempts) {
      if (Date.now() + wait >= deadline) throw late();
      await sleep(wait);
    }
  }
  throw new ReportError(keys.redact(`${what} failed after ${bounds.attempts} tries: ${last}`));
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

export const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null;

function pageEnvelope(what: string, body: unknown): { data: unknown[]; next: string | null } {
  // data and has_more are required: a body without them must not read as a day without usage.
  if (!isObject(body) || !Array.isArray(body.data) || typeof body.has_more !== 'boolean')
    throw new ReportError(`${what} is not in the documented shape (data, has_more)`);
  if (!body.has_more) return { data: body.data, next: null };
  if (typeof body.next_page !== 'string' || body.next_page === '')
    throw new ReportError(`${what} says has_more but gives no next_page`);
  return { data: body.data, next: body.next_page };
}

/** A UTC day's bounds. */
export function dayBounds(day: string): { start: Date; end: Date } {
  const start = new Date(`${day}T00:00:00.000Z`);
  return { start, end: new Date(start.getTime() + 86_400_000) };
}
