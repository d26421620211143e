/**
 * One WebSocket upgrade under /api/proxy/<provider>/…, step by step as handle() takes a plain request:
 *   route → handshake fields → key → draining → limits (admission.ts, plus the sockets' own caps)
 *   → upstream handshake → the caller's, with the subprotocol upstream chose → relay (session.ts).
 * Every refusal is an HTTP answer before the upgrade, in the provider's error shape, logged against the key
 * once it is known; an upstream that refuses the upgrade has its answer passed back as it came.
 */
import { upstreamOrigin } from '../../config.js';
import type { IncomingMessage } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Duplex } from 'node:stream';
import { ProxyError } from '../../errors.js';
import { newTimedId } from '../../ids.js';
import type { Outcome } from '../../types.js';
import {
  admitKey,
  checkRequestLine,
  logRefusal,
  presentedKey,
  refusalBody,
  refusalHeaders,
  route,
} from '../admission.js';
import { CONNECT_TIMEOUT_MS } from '../agent.js';
import type { Shutdown } from '../context.js';
import { unfiledCall } from '../exchange.js';
import type { CallerHandshakes } from './callers.js';
import type { EmitRow, WsProxyContext } from './context.js';
import { socketFacts, type SocketArrival } from './facts.js';
import {
  splitProtocols,
  upgradeHeadersForCaller,
  writeRawResponse,
  type OfferedProtocols,
} from './handshake.js';
import { SocketLedger, type SocketFacts } from './ledger.js';
import type { OpenSockets } from './open-sockets.js';
import { openSocket } from './session.js';
import { reachUpstream, type Reached } from './upstream.js';

export interface UpgradeServices {
  ctx: WsProxyContext;
  shutdown: Pick<Shutdown, 'isDraining'>;
  callers: CallerHandshakes;
  sockets: OpenSockets;
  emit: EmitRow;
}

/** An upgrade on its way: the request, the caller's raw socket, and what admission has learned. */
interface Upgrading {
  u: UpgradeServices;
  a: SocketArrival;
  req: IncomingMessage;
  socket: Duplex;
}

export async function upgrade(
  u: UpgradeServices,
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
): Promise<void> {
  const { id, at } = newTimedId();
  const a: SocketArrival = {
    id,
    createdAt: at,
    startedAt: performance.now(),
    provider: null,
    path: '',
    key: null,
  };
  const up: Upgrading = { u, a, req, socket };

  // 1. Route, then the request line and the handshake's own fields (subprotocols; the key in one place).
  const target = route(a, req.url ?? '');
  if (target instanceof ProxyError) return refuseUpgrade(up, target);
  const offered = splitProtocols(req.headers['sec-websocket-protocol']);
  const malformed = checkRequestLine(req) ?? checkHandshake(req, offered);
  if (malformed) return refuseUpgrade(up, malformed);

  // 2. Authenticate (a header, or a browser's `keyrelay-key.` subprotocol), then draining.
  const presented = presentedKey(req) ?? offered.keys[0];
  const key = admitKey(u.ctx, u.shutdown, a, await u.ctx.keys.check(presented), at);
  if (key instanceof ProxyError) return refuseUpgrade(up, key);

  // 3. Limits: the socket counts against the instance's and the key's socket caps for as long as it lives
  //    (from now: the upstream handshake holds a descriptor too), and its opening counts as one request.
  //    Each response.create on it is admitted again (session.ts).
  const facts = socketFacts(u.ctx, req, a, target.provider, key);
  const ledger = new SocketLedger(u.ctx, facts, u.emit);
  const capped = u.sockets.take(key);
  if (capped) return refuseUpgrade(up, capped, 'refused', ledger);
  let relayed = false;
  try {
    const limited = u.ctx.limits.check(key, target.provider, ledger.model, 'GET');
    if (limited) return refuseUpgrade(up, limited, 'refused', ledger);
    relayed = await relay(up, { facts, ledger, presented }, offered, head);
  } finally {
    if (!relayed) u.sockets.release(key.id);
  }
}

/** An admitted upgrade: what its rows are built from, and the key as presented (kept to re-check it). */
interface Admitted {
  facts: SocketFacts;
  ledger: SocketLedger;
  presented: string | undefined;
}

/** Steps 4 to 6; true once the socket is relayed (the open socket releases its count when it ends). */
async function relay(
  up: Upgrading,
  { facts, ledger, presented }: Admitted,
  offered: OfferedProtocols,
  head: Buffer,
): Promise<boolean> {
  const { u, a, req, socket } = up;
  // 4. Upstream first: the caller's handshake is answered with what upstream answered.
  const reached = await reachUpstream(
    {
      origin: upstreamOrigin(u.ctx.config, facts.provider).replace(/^http/, 'ws'),
      path: a.path,
      protocols: offered.forward,
      maxPayload: u.ctx.config.ws.maxMessageBytes,
      timeoutMs: CONNECT_TIMEOUT_MS,
    },
    req,
    socket,
    head,
  );
  if (reached.kind !== 'open') return notReached(up, facts, ledger, reached);
  const callerLeft = () => {
    reached.upstream.terminate();
    u.emit(ledger.socketRow({ ...emptySocket(), status: 0, outcome: 'client_aborted', errorCode: null }));
    return false;
  };
  if (socket.destroyed || !socket.writable || socket.readableEnded) {
    reached.takeEarly();
    return callerLeft();
  }
  const ttfbMs = performance.now() - a.startedAt;

  // 5. The caller's handshake: upstream's headers and chosen subprotocol, and our ids.
  const headers = [
    ...upgradeHeadersForCaller(reached.headers),
    `x-keyrelay-request-id: ${a.id}`,
    `x-keyrelay-connection-id: ${a.id}`,
  ];
  const caller = await u.callers.accept(req, socket, reached.takeEarly, headers, reached.protocol);
  if (!caller) return callerLeft();

  // 6. Relay until either side closes: each response its row, and the socket one more (ledger.ts).
  const upstream = reached.upstream;
  const { ctx, emit } = u;
  u.sockets.add(
    openSocket({
      ctx,
      caller,
      upstream,
      ledger,
      facts,
      presented,
      ttfbMs,
      upstreamHeaders: reached.headers,
      emit,
    }),
  );
  return true;
}

/** The upstream handshake did not open: upstream's own refusal passed back, or keyrelay's, or the caller left. */
function notReached(
  up: Upgrading,
  facts: SocketFacts,
  ledger: SocketLedger,
  reached: Exclude<Reached, { kind: 'open' }>,
): false {
  const { u, a, socket } = up;
  switch (reached.kind) {
    case 'refused': {
      const headers: [string, string][] = [...reached.headers, ['x-keyrelay-request-id', a.id]];
      writeRawResponse(socket, reached.status, headers, reached.body, reached.statusMessage);
      const row = ledger.socketRow({
        ...emptySocket(),
        status: reached.status,
        outcome: 'upstream_error',
        errorCode: null,
        ttfbMs: performance.now() - a.startedAt,
        bytesOut: reached.body.length,
        responseHeaders: Object.fromEntries(headers.map(([n, v]) => [n.toLowerCase(), v])),
        responseBody: reached.body.toString('utf8'),
      });
      u.emit(row);
      break;
    }
    case 'failed':
      u.ctx.metrics.upstreamErrors.inc({ provider: facts.provider, kind: reached.failure.kind });
      refuseUpgrade(up, reached.failure.error, reached.failure.outcome, ledger, reached.detail);
      break;
    case 'early_overflow':
      refuseUpgrade(
        up,
        new ProxyError('proxy_bad_request', 'Data sent before the handshake completed.'),
        'refused',
        ledger,
      );
      break;
    case 'caller_gone':
      u.emit(ledger.socketRow({ ...emptySocket(), status: 0, outcome: 'client_aborted', errorCode: null }));
  }
  return false;
}

/** What the handshake itself may not carry: subprotocols ws's server would refuse, the key given twice. */
function checkHandshake(req: IncomingMessage, offered: OfferedProtocols): ProxyError | null {
  if (!offered.valid) return new ProxyError('proxy_bad_request', 'Invalid Sec-WebSocket-Protocol.');
  const sources = offered.keys.length + (presentedKey(req) === undefined ? 0 : 1);
  if (sources > 1) return new ProxyError('proxy_bad_request', 'The key was given more than once.');
  return null;
}

/**
 * keyrelay's refusal of an upgrade, answered on the raw socket with the same head and body as a plain
 * request's (admission.ts), logged the same way, and its row once the key is known.
 */
function refuseUpgrade(
  up: Upgrading,
  err: ProxyError,
  outcome: Outcome = 'refused',
  ledger?: SocketLedger,
  detail?: string,
): void {
  const { u, a, req, socket } = up;
  const body = refusalBody(a, err);
  const headers = Object.entries(refusalHeaders(err, a.id, body)).map(([n, v]): [string, string] => [
    n,
    String(v),
  ]);
  writeRawResponse(socket, err.status, headers, Buffer.from(body));
  logRefusal(u.ctx, a, err, outcome, detail);
  const rows =
    ledger ??
    (a.key && a.provider
      ? new SocketLedger(u.ctx, socketFacts(u.ctx, req, a, a.provider, a.key), u.emit)
      : null);
  if (rows) u.emit(rows.socketRow({ ...emptySocket(), status: err.status, outcome, errorCode: err.code }));
  else {
    const refused = { ...a, status: err.status, outcome, errorCode: err.code };
    u.ctx.telemetry?.observe(unfiledCall(refused, req, performance.now()), req.headers, null);
  }
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
