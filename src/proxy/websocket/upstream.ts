/**
 * The upstream handshake, made before the caller's is answered, while the caller's socket is read (a paused
 * socket never notices its caller leaving). What the caller sends meanwhile is kept for ws (RFC 6455 forbids
 * frames before the 101, but none may be lost), up to MAX_EARLY_BYTES: past it the caller is refused.
 */
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import WebSocket from 'ws';
import { ProxyError } from '../../errors.js';
import { classifyUpstreamError, type UpstreamFailure } from '../upstream-errors.js';
import { passBackHeaders, upstreamHandshakeHeaders } from './handshake.js';

/**
 * What a caller may send before its 101, the upgrade request's trailing bytes included. A well-behaved client
 * sends nothing; a few frames written eagerly fit. Bounded because the upstream handshake may take up to the
 * connect timeout, and everything read meanwhile is held in memory.
 */
export const MAX_EARLY_BYTES = 64 * 1024;

/** Upstream's answer to a refused upgrade is passed back whole up to this size (error bodies are small). */
const MAX_REFUSAL_BODY = 1024 * 1024;

export type Reached =
  | {
      kind: 'open';
      upstream: WebSocket;
      headers: IncomingHttpHeaders;
      /** The subprotocol upstream chose, passed on to the caller. */
      protocol: string | undefined;
      /** Stops reading the caller and hands over what it sent early (see CallerHandshakes.accept). */
      takeEarly: () => Buffer;
    }
  | { kind: 'refused'; status: number; statusMessage?: string; headers: [string, string][]; body: Buffer }
  | { kind: 'failed'; failure: UpstreamFailure; detail: string }
  | { kind: 'caller_gone' }
  | { kind: 'early_overflow' };

export interface UpstreamTarget {
  /** ws:// or wss:// origin. */
  origin: string;
  /** Path and query, sent byte for byte. */
  path: string;
  /** The caller's subprotocols, minus keyrelay's own. */
  protocols: string[];
  maxPayload: number;
  timeoutMs: number;
}

const TIMED_OUT: UpstreamFailure = {
  error: new ProxyError('proxy_upstream_timeout'),
  outcome: 'timeout',
  kind: 'timeout',
};

export function reachUpstream(
  to: UpstreamTarget,
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
): Promise<Reached> {
  if (head.length > MAX_EARLY_BYTES) return Promise.resolve({ kind: 'early_overflow' });
  const headers = upstreamHandshakeHeaders(req);
  // Offered as a header, not as ws's `protocols`: ws would fail the handshake itself when upstream picks
  // none, where the caller's own client should decide. Upstream's choice is read on 'upgrade' below.
  if (to.protocols.length > 0) headers['Sec-WebSocket-Protocol'] = to.protocols.join(', ');
  const upstream = new WebSocket(`${to.origin}/`, [], {
    headers,
    perMessageDeflate: false,
    maxPayload: to.maxPayload,
    followRedirects: false,
    autoPong: false,
    // The path and query go upstream byte for byte, not as WHATWG URL parsing would re-encode them.
    finishRequest: (request: { path: string; end(): void }) => {
      request.path = to.path;
      request.end();
    },
  });
  return new Promise<Reached>((resolve) => {
    let settled = false;
    let timedOut = false;
    const done = (r: Reached) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.off('end', callerGone).off('close', callerGone);
      if (r.kind !== 'open') socket.off('data', onEarly);
      resolve(r);
    };
    // ws's own handshakeTimeout fails with a message only; this one is known by its flag.
    const timer = setTimeout(() => {
      timedOut = true;
      upstream.terminate();
    }, to.timeoutMs);
    const early: Buffer[] = head.length ? [head] : [];
    let earlyBytes = head.length;
    const onEarly = (b: Buffer) => {
      earlyBytes += b.length;
      if (earlyBytes <= MAX_EARLY_BYTES) return void early.push(b);
      upstream.terminate();
      done({ kind: 'early_overflow' });
    };
    const callerGone = () => {
      upstream.terminate();
      socket.destroy();
      done({ kind: 'caller_gone' });
    };
    const takeEarly = () => {
      socket.off('data', onEarly);
      return Buffer.concat(early);
    };
    socket.on('data', onEarly);
    socket.once('end', callerGone);
    socket.once('close', callerGone);

    let upgraded: IncomingHttpHeaders = {};
    let protocol: string | undefined;
    upstream.once('upgrade', (res) => {
      upgraded = res.headers;
      protocol = res.headers['sec-websocket-protocol'];
      // ws checks the answer against the protocols it was given (none): the choice is passed on instead.
      delete res.headers['sec-websocket-protocol'];
    });
    upstream.once('open', () => {
      // Upstream may speak first (Realtime's session.created): hold it until the relay listens.
      upstream.pause();
      done({ kind: 'open', upstream, headers: upgraded, protocol, takeEarly });
    });
    upstream.once('unexpected-response', (_request, res) => void readRefusal(res).then(done));
    upstream.once('error', (err) => {
      const failure = timedOut ? TIMED_OUT : classifyUpstreamError(err);
      done({ kind: 'failed', failure, detail: err.message });
    });
  });
}

/** Upstream's refusal of the upgrade, as it came (framing redone by us). */
function readRefusal(res: IncomingMessage): Promise<Reached> {
  return new Promise((resolve) => {
    const parts: Buffer[] = [];
    let size = 0;
    res.on('data', (b: Buffer) => {
      size += b.length;
      if (size <= MAX_REFUSAL_BODY) parts.push(b);
    });
    res.on('error', () => {});
    res.on('close', () =>
      resolve({
        kind: 'refused',
        status: res.statusCode ?? 502,
        statusMessage: res.statusMessage,
        headers: passBackHeaders(res.rawHeaders),
        body: Buffer.concat(parts),
      }),
    );
  });
}
