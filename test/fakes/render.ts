import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { Scenario } from './scenario.js';

/** What a fake renders from: the request as received. */
export interface FakeRequest {
  method: string;
  /** Path and query as received. */
  path: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/** A response before encoding and chunking: each piece is one SSE event (or the whole JSON body). */
export interface RenderedResponse {
  status: number;
  headers: Record<string, string | string[]>;
  pieces: string[];
  stream: boolean;
}

export type Headers = Record<string, string | string[]>;

/** Options both fakes take. */
export interface FakeCommonOptions {
  /** Answer a request yourself; return undefined to fall back to the built-in behaviour. */
  respond?: (req: FakeRequest, scenario: Scenario) => RenderedResponse | undefined;
}

/** Fixed so that bodies are a pure function of the request. */
export const FAKE_CREATED = 1_763_856_000;

export function sha256(buf: Buffer | string): string {
  return createHash('sha256').update(buf).digest('hex');
}

/** A stable id derived from the request, so expected bodies can be computed ahead of time. */
export function deriveId(req: FakeRequest, length = 24): string {
  // stream_options is left out so that a request keyrelay asked usage for gets the same id as the
  // caller's original request: the stripped stream can then be compared byte for byte.
  const json = parseJsonBody(req.body);
  let body = req.body;
  if (json && 'stream_options' in json) {
    const { stream_options: _ignored, ...rest } = json;
    body = Buffer.from(JSON.stringify(rest));
  } else if (json) {
    body = Buffer.from(JSON.stringify(json));
  }
  return sha256(Buffer.concat([Buffer.from(`${req.method} ${req.path}\n`), body])).slice(0, length);
}

export function parseJsonBody(body: Buffer): Record<string, unknown> | undefined {
  if (body.length === 0) return undefined;
  try {
    const parsed: unknown = JSON.parse(body.toString('utf8'));
    return parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)
      ? (parsed as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

/** The text pieces a fake streams: "Hello", " part1", " part2", ... */
export function textDeltas(count: number): string[] {
  const deltas = Array.from({ length: count }, (_, i) => (i === 0 ? 'Hello' : ` part${i}`));
  // A model's tokens do not follow words: the first word arrives in two pieces ("Hel", "lo part1").
  if (count >= 2) {
    deltas[0] = 'Hel';
    deltas[1] = `lo${deltas[1]}`;
  }
  return deltas;
}

export function eventCount(scenario: Scenario, fallback: number): number {
  return scenario.events ?? fallback;
}

export function jsonResponse(status: number, headers: Headers, value: unknown): RenderedResponse {
  return {
    status,
    headers: { 'content-type': 'application/json', ...headers },
    pieces: [JSON.stringify(value)],
    stream: false,
  };
}

export function sseResponse(headers: Headers, pieces: string[]): RenderedResponse {
  return {
    status: 200,
    headers: { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', ...headers },
    pieces,
    stream: true,
  };
}

/** The exact unencoded body bytes a rendered response produces (before compression/chunking). */
export function renderBody(rendered: RenderedResponse): Buffer {
  return Buffer.from(rendered.pieces.join(''), 'utf8');
}
