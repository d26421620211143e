/**
 * What one proxied request accumulates on its way through, and how that becomes a log row. Kept apart from
 * handle.ts so the hot path reads as steps, and the row's ~40 fields live in one place.
 */
import type { IncomingMessage } from 'node:http';
import type { Config } from '../config.js';
import type { Outcome, Provider, RequestLogRow } from '../types.js';
import type { Hold } from '../limits/limiter.js';
import type { KeyRecord } from '../store/types.js';
import type { Usage } from '../usage/index.js';
import { providerCredential } from '../providers/index.js';
import { priceRow, type RequestInfo } from '../metering/index.js';
import type { CallRecord } from '../telemetry/index.js';
import { endUserOf, propertiesOf, sessionOf } from './attribution.js';
import { redactHeaders } from './headers.js';
import { redactPathQuery } from './redact.js';

export interface Exchange {
  id: string;
  socketAddress: string | null;
  startedAt: number; // performance.now()
  createdAt: string;
  provider: Provider | null;
  path: string;
  key: KeyRecord | null;
  info: RequestInfo | null;
  requestBody: Buffer | null;
  logBodies: boolean;
  status: number;
  outcome: Outcome;
  errorCode: string | null;
  /** The message the caller got with errorCode. */
  errorMessage: string | null;
  ttfbMs: number | null;
  responseBytes: number;
  responseHeaders: Readonly<Record<string, string | string[]>>;
  usage: Usage | null;
  /** Set where the cost is not the usage's (batch results: the batch's total, once): wins over pricing. */
  priced?: { cost_usd: number | null; price_source: string | null } | null;
  /** `searchText`: a stream's, for search (RequestLogRow.response_search_text). */
  responseBody: Readonly<{ text: string | null; truncated: boolean; searchText?: string | null }>;
  /** Its row was built (or building it began): an exchange is recorded once, even if recording fails. */
  finished: boolean;
  /** What the key's limits hold for this request: settled with its row, whatever its ending. */
  hold: Hold | null;
  /** The handler's promise, in the shutdown's `active` set until the row is queued. */
  running: Promise<void> | null;
}

// Replaced, never changed in place: shared by every exchange that has no response (yet).
const NO_HEADERS: Readonly<Record<string, string>> = Object.freeze({});
const NO_BODY = Object.freeze({ text: null, truncated: false });

/**
 * `id` and `createdAt` come from one clock reading (ids.ts `newTimedId`): the log finds rows by time through
 * their ids. `socketAddress`: the caller's address, taken at arrival (a socket cut mid-stream no longer has one).
 */
export function newExchange(
  stamp: { id: string; at: string },
  startedAt: number,
  socketAddress?: string,
): Exchange {
  return {
    id: stamp.id,
    socketAddress: socketAddress ?? null,
    startedAt,
    createdAt: stamp.at,
    provider: null,
    path: '',
    key: null,
    info: null,
    requestBody: null,
    logBodies: true,
    status: 0,
    outcome: 'ok',
    errorCode: null,
    errorMessage: null,
    ttfbMs: null,
    responseBytes: 0,
    responseHeaders: NO_HEADERS,
    usage: null,
    responseBody: NO_BODY,
    finished: false,
    hold: null,
    running: null,
  };
}

const EMPTY_USAGE: Usage = {
  input_tokens: null,
  cache_read_tokens: null,
  cache_write_tokens: null,
  output_tokens: null,
  reasoning_tokens: null,
  source: 'none',
  model: null,
};

function header(req: IncomingMessage, name: string): string | null {
  const v = req.headers[name];
  return typeof v === 'string' && v !== '' ? v.slice(0, 256) : null;
}

function clientIp(req: IncomingMessage, trustProxy: boolean, socketAddress: string | null): string | null {
  if (trustProxy) {
    const xff = req.headers['x-forwarded-for'];
    const first = (Array.isArray(xff) ? xff[0] : xff)?.split(',')[0]?.trim();
    if (first) return first;
  }
  return socketAddress ?? req.socket.remoteAddress ?? null;
}

/**
 * The code and message logged when the upstream body fails after the caller got its head (status 200 and
 * part of a stream): not "unreachable" — it was reached, then it dropped the connection.
 */
export function midResponseFailure(
  failure: { error: { code: string; message: string }; kind: string },
  draining: boolean,
): { code: string; message: string } {
  if (draining)
    return { code: 'proxy_unavailable', message: 'keyrelay shut down before the response finished.' };
  if (failure.kind === 'dropped')
    return {
      code: 'proxy_upstream_dropped',
      message: 'The provider closed the connection mid-response; the caller got an incomplete response.',
    };
  return { code: failure.error.code, message: failure.error.message };
}

/**
 * Whether this exchange's bodies are kept for its row: the request log is on and the caller did not opt out
 * (`proxy-log-bodies: false`). With the log off the row is never written, so reading a stream's body as it
 * passes (a copy of each piece, its text and its search text at the end) would be work for nothing.
 */
export function keepsBodies(
  config: Readonly<Pick<Config, 'requestLog'>>,
  headers: IncomingMessage['headers'],
): boolean {
  return config.requestLog && headers['proxy-log-bodies'] !== 'false';
}

/** The logged prefix of the request body; a body kept whole was already decoded for its parse. */
function requestBodyText(body: Buffer, bodyLogBytes: number, decoded: string | undefined): string {
  return decoded !== undefined && body.length <= bodyLogBytes
    ? decoded
    : body.subarray(0, bodyLogBytes).toString('utf8');
}

/** What building a row needs beyond the exchange: settings, the credential fingerprint, the price. */
export interface RowSettings {
  config: Readonly<Pick<Config, 'bodyLogBytes' | 'trustProxy'>>;
  fingerprint: (credential: string) => string;
  cost: (
    provider: Provider,
    model: string | null,
    usage: Usage,
  ) => { cost_usd: number | null; price_source: string | null };
}

/** The log row for a finished (or refused, or aborted) exchange. Only called once the response is over. */
export function toLogRow(
  ex: Exchange,
  req: IncomingMessage,
  ctx: RowSettings,
  endedAt: number,
): RequestLogRow {
  const usage = ex.usage ?? EMPTY_USAGE;
  const model = usage.model ?? ex.info?.model ?? null;
  const priced = ex.priced
    ? ex.priced
    : ex.provider
      ? priceRow(ex.provider, ex.info?.path ?? null, ex.status, model, usage, ctx.cost)
      : null;
  const { bodyLogBytes, trustProxy } = ctx.config;
  const keepBodies = ex.logBodies && bodyLogBytes > 0;
  const reqBody = keepBodies && ex.requestBody && ex.requestBody.length > 0 ? ex.requestBody : null;
  const credential = ex.provider ? providerCredential(ex.provider, req.headers) : null;
  return {
    id: ex.id,
    created_at: ex.createdAt,
    key_id: ex.key!.id,
    account_id: ex.key!.account_id,
    org_id: ex.key!.org_id,
    provider: ex.provider!,
    method: req.method ?? 'GET',
    path: redactPathQuery(ex.path).slice(0, 2048),
    model,
    stream: ex.info?.stream ?? false,
    status: ex.status,
    outcome: ex.outcome,
    error_code: ex.errorCode,
    latency_ms: Math.round((endedAt - ex.startedAt) * 1000) / 1000,
    ttfb_ms: ex.ttfbMs === null ? null : Math.round(ex.ttfbMs * 1000) / 1000,
    input_tokens: usage.input_tokens,
    cache_read_tokens: usage.cache_read_tokens,
    cache_write_tokens: usage.cache_write_tokens,
    output_tokens: usage.output_tokens,
    reasoning_tokens: usage.reasoning_tokens,
    usage_source: usage.source,
    tool_uses: usage.tool_uses ?? null,
    cost_usd: priced?.cost_usd ?? null,
    price_source: priced?.price_source ?? null,
    end_user: endUserOf(req.headers, ex.info),
    session: sessionOf(req.headers, ex.provider, ex.info?.json),
    properties: propertiesOf(req.headers),
    request_bytes: ex.requestBody?.length ?? 0,
    response_bytes: ex.responseBytes,
    request_headers: redactHeaders(req.headers),
    response_headers: redactHeaders(ex.responseHeaders),
    request_body: reqBody ? requestBodyText(reqBody, bodyLogBytes, ex.info?.text) : null,
    response_body: keepBodies ? ex.responseBody.text : null,
    request_body_truncated: reqBody !== null && reqBody.length > bodyLogBytes,
    response_body_truncated: keepBodies && ex.responseBody.truncated,
    response_search_text: keepBodies ? (ex.responseBody.searchText ?? null) : null,
    client_ip: clientIp(req, trustProxy, ex.socketAddress),
    user_agent: header(req, 'user-agent'),
    credential_fingerprint: credential ? ctx.fingerprint(credential) : null,
    error_message: ex.errorMessage,
  };
}

/**
 * What telemetry sees of an exchange that has no row (refused before a key or provider was known): an HTTP
 * request's, or a WebSocket handshake's.
 */
export function unfiledCall(
  ex: Pick<
    Exchange,
    'id' | 'createdAt' | 'provider' | 'path' | 'status' | 'outcome' | 'errorCode' | 'startedAt'
  >,
  req: IncomingMessage,
  endedAt: number,
): CallRecord {
  return {
    id: ex.id,
    created_at: ex.createdAt,
    provider: ex.provider,
    key_id: null,
    account_id: null,
    path: redactPathQuery(ex.path),
    method: req.method ?? 'GET',
    model: null,
    stream: false,
    status: ex.status,
    outcome: ex.outcome,
    error_code: ex.errorCode,
    latency_ms: endedAt - ex.startedAt,
    input_tokens: null,
    cache_read_tokens: null,
    cache_write_tokens: null,
    output_tokens: null,
    usage_source: 'none',
    cost_usd: null,
    end_user: null,
    session: null,
  };
}
