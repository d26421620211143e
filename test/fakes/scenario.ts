import type { IncomingHttpHeaders } from 'node:http';

export type FakeEncoding = 'gzip' | 'br' | 'deflate' | 'zstd';

/** Per-request behaviour, chosen by `x-fake-*` request headers (they cross the proxy untouched). */
export interface Scenario {
  /** `x-fake-status`: answer with this status and the provider's error body. */
  status?: number;
  /** `x-fake-first-byte-delay-ms`: wait before the status line. */
  firstByteDelayMs: number;
  /** `x-fake-event-delay-ms`: pause between SSE events (and before each JSON piece). */
  eventDelayMs: number;
  /** `x-fake-chunk-size`: write the (encoded) body in pieces of at most N bytes, each flushed alone. */
  chunkSize?: number;
  /** `x-fake-chunk-delay-ms`: pause between those pieces (default: one event-loop turn). */
  chunkDelayMs: number;
  /** `x-fake-stall-after-events`: send N events, then hang with the socket open. */
  stallAfterEvents?: number;
  /** `x-fake-drop-after-events`: send N events, then destroy the socket. */
  dropAfterEvents?: number;
  /** `x-fake-encoding`: compress the body and set content-encoding. */
  encoding?: FakeEncoding;
  /** `x-fake-redirect`: answer 307 with this location. */
  redirect?: string;
  /** `x-fake-events`: content deltas in a stream (and pieces of the non-streamed text). */
  events?: number;
  /** `x-fake-set-headers`: extra response headers (JSON object; array values repeat the header). */
  setHeaders: Record<string, string | string[]>;
  /** `x-fake-usage`: JSON usage numbers merged over the fake's defaults. */
  usage: Record<string, number>;
  /** `x-fake-tool-calls`: how often each server-side tool the request declares runs (default 1). */
  toolCalls: number;
}

const ENCODINGS = new Set<string>(['gzip', 'br', 'deflate', 'zstd']);

function readHeader(headers: IncomingHttpHeaders, name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
}

function readInt(headers: IncomingHttpHeaders, name: string): number | undefined {
  const v = readHeader(headers, name);
  if (v === undefined) return undefined;
  const n = Number.parseInt(v, 10);
  return Number.isFinite(n) && n >= 0 ? n : undefined;
}

function readJsonObject(headers: IncomingHttpHeaders, name: string): Record<string, unknown> {
  const v = readHeader(headers, name);
  if (v === undefined) return {};
  try {
    const parsed: unknown = JSON.parse(v);
    return parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)
      ? (parsed as Record<string, unknown>)
      : {};
  } catch {
    return {};
  }
}

export function parseScenario(headers: IncomingHttpHeaders): Scenario {
  const encoding = readHeader(headers, 'x-fake-encoding')?.toLowerCase();
  const setHeaders: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(readJsonObject(headers, 'x-fake-set-headers'))) {
    if (typeof v === 'string') setHeaders[k] = v;
    else if (Array.isArray(v)) setHeaders[k] = v.map(String);
    else if (typeof v === 'number') setHeaders[k] = String(v);
  }
  const usage: Record<string, number> = {};
  for (const [k, v] of Object.entries(readJsonObject(headers, 'x-fake-usage'))) {
    if (typeof v === 'number' && Number.isFinite(v)) usage[k] = v;
  }
  const chunkSize = readInt(headers, 'x-fake-chunk-size');
  return {
    status: readInt(headers, 'x-fake-status'),
    firstByteDelayMs: readInt(headers, 'x-fake-first-byte-delay-ms') ?? 0,
    eventDelayMs: readInt(headers, 'x-fake-event-delay-ms') ?? 0,
    chunkSize: chunkSize !== undefined && chunkSize > 0 ? chunkSize : undefined,
    chunkDelayMs: readInt(headers, 'x-fake-chunk-delay-ms') ?? 0,
    stallAfterEvents: readInt(headers, 'x-fake-stall-after-events'),
    dropAfterEvents: readInt(headers, 'x-fake-drop-after-events'),
    encoding: encoding !== undefined && ENCODINGS.has(encoding) ? (encoding as FakeEncoding) : undefined,
    redirect: readHeader(headers, 'x-fake-redirect'),
    events: readInt(headers, 'x-fake-events'),
    setHeaders,
    usage,
    toolCalls: readInt(headers, 'x-fake-tool-calls') ?? 1,
  };
}
