/**
 * WebSockets under /api/proxy/<provider>/… (docs/websockets.md), hooked on the node:http server's 'upgrade' event:
 *   route → handshake checks → key (header or `keyrelay-key.` subprotocol) → limits → upstream handshake
 *   → caller handshake with the subprotocol upstream chose → relay (relay.ts) → rows (ledger.ts).
 * Every refusal is an HTTP answer before the upgrade, in the provider's error shape; an upstream that
 * refuses the upgrade has its answer passed back as it came. Open sockets are tracked per key so that a
 * revocation (key events: local, Redis, the database change feed) closes them, and shutdown drains them.
 */
import type { IncomingMessage, Server } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Duplex } from 'node:stream';
import { Gauge } from 'prom-client';
import WebSocket, { WebSocketServer } from 'ws';
import { ProxyError } from '../../errors.js';
import { newTimedId } from '../../ids.js';
import type { KeyEvent } from '../../keys/events.js';
import type { Hold } from '../../limits/limiter.js';
import type { Provider, RequestLogRow } from '../../types.js';
import { observeRow } from '../../metrics.js';
import type { KeyRecord } from '../../store/types.js';
import { PROVIDER_IDS, PROVIDERS, providerCredential } from '../../providers/index.js';
import type { ProxyServices, Shutdown } from '../context.js';
import { keepsBodies } from '../exchange.js';
import { findDuplicateSingleton } from '../headers.js';
import { PROXY_PREFIX, resolveTarget } from '../target.js';
import {
  handshakeProblem,
  passBackHeaders,
  splitProtocols,
  upgradeHeadersForCaller,
  upstreamHandshakeHeaders,
  writeRawResponse,
  writeRefusal,
} from './handshake.js';
import { SocketLedger, type SocketFacts } from './ledger.js';
import { servePlain } from './plain-fallback.js';
import { openSocket, type OpenSocket } from './session.js';

/** The HTTP proxy's services; sockets open their own upstream connections (ws), not through the pool. */
export type WsProxyContext = Omit<ProxyServices, 'dispatcher'>;

export interface WebSocketProxy {
  /** A key changed somewhere: its open sockets re-check it and close (1008) when it no longer works. */
  onKeyEvent(e: KeyEvent): void;
  /** Shutdown: sockets get `graceMs` to end on their own, then are closed with 1001; resolves once all rows are out. */
  drain(graceMs: number): Promise<void>;
  readonly openSockets: number;
}

/** Upstream's answer to a refused upgrade is passed back whole up to this size (error bodies are small). */
const MAX_REFUSAL_BODY = 1024 * 1024;

export function attachWebSocketProxy(
  server: Server,
  ctx: WsProxyContext,
  shutdown: Pick<Shutdown, 'isDraining'>,
): WebSocketProxy {
  const wss = new WebSocketServer({
    noServer: true,
    perMessageDeflate: false,
    maxPayload: ctx.config.ws.maxMessageBytes,
    autoPong: false,
    clientTracking: false,
    // The caller gets exactly the subprotocol upstream accepted (ws would otherwise pick the first offered,
    // which may be the keyrelay-key entry).
    handleProtocols: (_offered, req) => chosenProtocol.get(req) || false,
  });
  const chosenProtocol = new WeakMap<IncomingMessage, string>();
  /** Header lines for the caller's 101, per request: upstream's headers and our ids. */
  const extraHeaders = new WeakMap<IncomingMessage, string[]>();
  wss.on('headers', (headers, req) => headers.push(...(extraHeaders.get(req) ?? [])));
  const byKey = new Map<string, Set<OpenSocket>>();
  const handshakes = new Set<Promise<void>>();
  const closing = new Set<Promise<void>>();
  new Gauge({
    name: 'keyrelay_websockets_open',
    help: 'WebSockets relayed right now (caller and upstream both open).',
    registers: [ctx.metrics.registry],
    collect() {
      this.set(closing.size);
    },
  });

  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => {});
    const url = req.url ?? '';
    // Not a WebSocket handshake (h2c, or a stray Upgrade header): served as the plain request it also is.
    if (handshakeProblem(req)) return servePlain(server, req, socket, head, ctx.config.maxBodyBytes);
    if (!url.startsWith(PROXY_PREFIX)) {
      const body = Buffer.from(JSON.stringify({ error: { code: 'not_found', message: 'Not found.' } }));
      return writeRawResponse(socket, 404, [['content-type', 'application/json']], body);
    }
    const p = upgrade(req, socket, head)
      .catch((err: unknown) => {
        ctx.log.warn({ err }, 'websocket upgrade failed');
        socket.destroy();
      })
      .finally(() => handshakes.delete(p));
    handshakes.add(p);
  });

  async function upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    const { id, at: createdAt } = newTimedId();
    const startedAt = performance.now();
    const target = resolveTarget(req.url ?? '');
    if (!target.ok) {
      const code = target.reason === 'unknown_provider' ? 'proxy_unknown_provider' : 'proxy_bad_request';
      return writeRefusal(socket, target.provider ?? null, new ProxyError(code, target.detail), id);
    }
    const provider = target.provider;
    const path = target.path + target.query;
    const bad = (detail: string) => new ProxyError('proxy_bad_request', detail);
    const dup = findDuplicateSingleton(req.rawHeaders);
    if (dup) return writeRefusal(socket, provider, bad(`Duplicate ${dup} header.`), id);
    const offered = splitProtocols(req.headers['sec-websocket-protocol']);
    if (!offered.valid) return writeRefusal(socket, provider, bad('Invalid Sec-WebSocket-Protocol.'), id);
    const header = req.headers['proxy-api-key'];
    const sources = offered.keys.length + (typeof header === 'string' ? 1 : 0);
    if (sources > 1) return writeRefusal(socket, provider, bad('The key was given more than once.'), id);
    const presented = typeof header === 'string' ? header : offered.keys[0];

    const checked = await ctx.keys.check(presented);
    const key = checked.key;
    const facts = key ? socketFacts(req, id, createdAt, startedAt, provider, path, key) : null;
    const ledger = facts ? new SocketLedger(ctx, facts, emit) : null;
    const refuse = (err: ProxyError) => {
      writeRefusal(socket, provider, err, id);
      if (!ledger) return;
      ctx.log.info({ reqId: id, code: err.code, provider }, 'websocket refused');
      emit(
        ledger.socketRow({ ...emptySocket(), status: err.status, outcome: 'refused', errorCode: err.code }),
      );
    };
    if (!checked.ok) return refuse(checked.error);
    if (shutdown.isDraining()) return refuse(new ProxyError('proxy_unavailable', undefined, 5));
    ctx.lastUsed.mark(checked.key.id, createdAt);
    // Opening a socket counts as one request; each response.create on it counts again (session.ts).
    const limited = ctx.limits.check(checked.key, provider, ledger!.model, 'GET');
    if (limited) return refuse(limited);

    // Upstream first: the caller's handshake is answered with what upstream answered.
    const origin = ctx.config.upstreams[provider].replace(/^http/, 'ws');
    const headers = upstreamHandshakeHeaders(req);
    // Offered as a header, not as ws's `protocols`: ws would fail the handshake itself when upstream picks
    // none, where the caller's own client should decide. Upstream's choice is read on 'upgrade' below.
    if (offered.forward.length > 0) headers['Sec-WebSocket-Protocol'] = offered.forward.join(', ');
    const upstream = new WebSocket(`${origin}/`, [], {
      headers,
      perMessageDeflate: false,
      maxPayload: ctx.config.ws.maxMessageBytes,
      handshakeTimeout: ctx.config.connectTimeoutMs,
      followRedirects: false,
      autoPong: false,
      // The path and query go upstream byte for byte, not as WHATWG URL parsing would re-encode them.
      finishRequest: (request: { path: string; end(): void }) => {
        request.path = path;
        request.end();
      },
    });
    let upgradeHeaders: IncomingMessage['headers'] = {};
    let chosen: string | undefined;
    upstream.once('upgrade', (res) => {
      upgradeHeaders = res.headers;
      chosen = res.headers['sec-websocket-protocol'];
      // ws checks the answer against the protocols it was given (none): the choice is passed on instead.
      delete res.headers['sec-websocket-protocol'];
    });
    // Read the caller's socket meanwhile: a paused socket never notices the caller leaving. Whatever it sends
    // early is kept for ws (RFC 6455 forbids frames before the 101, but none may be lost).
    const early: Buffer[] = [];
    const onEarly = (b: Buffer) => early.push(b);
    let gone = false;
    const callerGone = () => {
      gone = true;
      upstream.terminate();
      socket.destroy();
    };
    socket.on('data', onEarly);
    socket.once('end', callerGone);
    socket.once('close', callerGone);

    const outcome = await new Promise<'open' | 'refused' | 'failed'>((resolve) => {
      upstream.once('open', () => {
        // Upstream may speak first (Realtime's session.created): hold it until the relay listens.
        upstream.pause();
        resolve('open');
      });
      upstream.once('unexpected-response', (_request, res) => {
        const parts: Buffer[] = [];
        let size = 0;
        res.on('data', (b: Buffer) => {
          size += b.length;
          if (size <= MAX_REFUSAL_BODY) parts.push(b);
        });
        res.on('error', () => {});
        res.on('close', () => {
          const body = Buffer.concat(parts);
          const headers = passBackHeaders(res.rawHeaders);
          headers.push(['x-keyrelay-request-id', id]);
          writeRawResponse(socket, res.statusCode ?? 502, headers, body, res.statusMessage);
          if (ledger)
            emit(
              ledger.socketRow({
                ...emptySocket(),
                status: res.statusCode ?? 502,
                outcome: 'upstream_error',
                errorCode: null,
                ttfbMs: performance.now() - startedAt,
                bytesOut: body.length,
                responseHeaders: Object.fromEntries(headers.map(([n, v]) => [n.toLowerCase(), v])),
                responseBody: body.toString('utf8'),
              }),
            );
          resolve('refused');
        });
      });
      upstream.once('error', (err) => {
        if (gone || socket.destroyed) {
          // The caller left while upstream was being reached (its close terminated the attempt).
          if (ledger)
            emit(
              ledger.socketRow({ ...emptySocket(), status: 0, outcome: 'client_aborted', errorCode: null }),
            );
          return resolve('failed');
        }
        const timeout = /timed out/i.test(err.message);
        ctx.metrics.upstreamErrors.inc({ provider, kind: timeout ? 'timeout' : 'connect' });
        const e = new ProxyError(timeout ? 'proxy_upstream_timeout' : 'proxy_upstream_unreachable');
        writeRefusal(socket, provider, e, id);
        ctx.log.warn({ reqId: id, code: e.code, provider, detail: err.message }, 'upstream failure');
        if (ledger)
          emit(
            ledger.socketRow({
              ...emptySocket(),
              status: e.status,
              outcome: timeout ? 'timeout' : 'upstream_error',
              errorCode: e.code,
            }),
          );
        resolve('failed');
      });
    });
    socket.off('end', callerGone);
    socket.off('close', callerGone);
    if (outcome !== 'open') return;
    const callerLeft = () => {
      upstream.terminate();
      emit(ledger!.socketRow({ ...emptySocket(), status: 0, outcome: 'client_aborted', errorCode: null }));
    };
    if (socket.destroyed || !socket.writable || socket.readableEnded) {
      socket.off('data', onEarly);
      return callerLeft();
    }
    const ttfbMs = performance.now() - startedAt;
    extraHeaders.set(req, [
      ...upgradeHeadersForCaller(upgradeHeaders),
      `x-keyrelay-request-id: ${id}`,
      `x-keyrelay-connection-id: ${id}`,
    ]);
    if (chosen) chosenProtocol.set(req, chosen);
    const caller = await new Promise<WebSocket | null>((resolve) => {
      // ws destroys a socket it finds unusable without calling back.
      const onClose = () => resolve(null);
      socket.once('close', onClose);
      // Same tick as ws attaching its own 'data' listener: nothing arrives in between.
      socket.off('data', onEarly);
      wss.handleUpgrade(req, socket, Buffer.concat([head, ...early]), (ws) => {
        socket.off('close', onClose);
        resolve(ws);
      });
    });
    if (!caller) return callerLeft();
    const open = openSocket({
      ctx,
      caller,
      upstream,
      ledger: ledger!,
      facts: facts!,
      presented: presented!,
      ttfbMs,
      upstreamHeaders: upgradeHeaders,
      emit,
      onEnd: (s) => {
        const set = byKey.get(s.keyId);
        set?.delete(s);
        if (set?.size === 0) byKey.delete(s.keyId);
      },
    });
    let set = byKey.get(key!.id);
    if (!set) byKey.set(key!.id, (set = new Set()));
    set.add(open);
    closing.add(open.ended);
    void open.ended.finally(() => closing.delete(open.ended));
  }

  function emit(row: RequestLogRow, hold: Hold | null = null): void {
    // A relayed socket's row would put its lifetime (minutes, hours) into the request latency histogram.
    if (row.status !== 101) observeRow(ctx.metrics, row);
    ctx.record(row);
    ctx.limits.settle(hold, row); // a response's hold (issue #13); null for socket rows
  }

  function socketFacts(
    req: IncomingMessage,
    id: string,
    createdAt: string,
    startedAt: number,
    provider: Provider,
    path: string,
    key: KeyRecord,
  ): SocketFacts {
    const events = PROVIDERS[provider].socket;
    const offered = splitProtocols(req.headers['sec-websocket-protocol']);
    const prefix = events?.credentialSubprotocol ? `${events.credentialSubprotocol}.` : null;
    const inProtocol = prefix ? offered.forward.find((p) => p.startsWith(prefix)) : undefined;
    const credential =
      providerCredential(provider, req.headers) ?? (inProtocol ? inProtocol.slice(prefix!.length) : null);
    return {
      id,
      createdAt,
      startedAt,
      provider,
      path,
      key,
      req: redactedRequest(req),
      protocol: events?.protocolOf(path) ?? 'other',
      events,
      logBodies: keepsBodies(ctx.config, req.headers),
      endUser: null,
      credentialFingerprint: credential ? ctx.fingerprint(credential) : null,
    };
  }

  return {
    onKeyEvent(e) {
      const targets =
        e.type === 'flush_all'
          ? [...byKey.values()].flatMap((s) => [...s])
          : [...(byKey.get(e.key_id) ?? [])];
      for (const s of targets) void s.recheck();
    },
    async drain(graceMs) {
      await Promise.allSettled([...handshakes]);
      if (closing.size > 0) {
        const deadline = setTimeout(() => {
          for (const set of byKey.values())
            for (const s of set) s.close(1001, 'keyrelay: shutting down', 'proxy_unavailable');
        }, graceMs);
        await Promise.allSettled([...closing]);
        clearTimeout(deadline);
      }
      wss.close();
    },
    get openSockets() {
      return closing.size;
    },
  };
}

function emptySocket() {
  return {
    status: 0,
    outcome: 'ok' as const,
    errorCode: null,
    ttfbMs: null,
    messagesIn: 0,
    messagesOut: 0,
    bytesIn: 0,
    bytesOut: 0,
    closeCode: null,
    closeReason: null,
    responseHeaders: {},
  };
}

/** Subprotocol names whose entries carry a credential: keyrelay's key, and any provider's (whatever the route). */
const CREDENTIAL_PROTOCOLS = new Set(
  ['keyrelay-key', ...PROVIDER_IDS.map((p) => PROVIDERS[p].socket?.credentialSubprotocol)].filter(
    (p): p is string => !!p,
  ),
);

function redactProtocol(entry: string): string {
  const dot = entry.indexOf('.');
  return dot > 0 && CREDENTIAL_PROTOCOLS.has(entry.slice(0, dot))
    ? `${entry.slice(0, dot)}.[redacted]`
    : entry;
}

/** The upgrade request as the log sees it: subprotocol entries that carry a key keep their name only. */
function redactedRequest(req: IncomingMessage): IncomingMessage {
  const proto = req.headers['sec-websocket-protocol'];
  if (proto === undefined) return req;
  const redacted = (Array.isArray(proto) ? proto.join(',') : proto)
    .split(',')
    .map((p) => redactProtocol(p.trim()))
    .join(', ');
  const headers = { ...req.headers, 'sec-websocket-protocol': redacted };
  return { headers, method: req.method, socket: req.socket, rawHeaders: req.rawHeaders } as IncomingMessage;
}
