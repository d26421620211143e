/**
 * WebSockets under /api/proxy/<provider>/… (docs/websockets.md), hooked on the node:http server's 'upgrade'
 * event; each upgrade is taken step by step in upgrade.ts. Open sockets are counted and kept per key
 * (open-sockets.ts) so that a revocation (key events: local, Redis, the database change feed) closes them,
 * and shutdown drains them.
 */
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { Gauge } from 'prom-client';
import { descriptorLimit } from '../../http-guard.js';
import type { KeyEvent } from '../../keys/events.js';
import { observeRow } from '../../metrics.js';
import type { Shutdown } from '../context.js';
import { PROXY_PREFIX } from '../target.js';
import { CallerHandshakes } from './callers.js';
import type { EmitRow, WsProxyContext } from './context.js';
import { handshakeProblem } from './handshake.js';
import { maxSockets, OpenSockets } from './open-sockets.js';
import { servePlain } from './plain-fallback.js';
import { upgrade, type UpgradeServices } from './upgrade.js';

export type { WsProxyContext } from './context.js';

export interface WebSocketProxy {
  /** A key changed somewhere: its open sockets re-check it and close (1008) when it no longer works. */
  onKeyEvent(e: KeyEvent): void;
  /** Shutdown: sockets get `graceMs` to end on their own, then are closed with 1001; resolves once all rows are out. */
  drain(graceMs: number): Promise<void>;
  readonly openSockets: number;
}

export function attachWebSocketProxy(
  server: Server,
  ctx: WsProxyContext,
  shutdown: Pick<Shutdown, 'isDraining'>,
): WebSocketProxy {
  const sockets = new OpenSockets(maxSockets(descriptorLimit()));
  const callers = new CallerHandshakes(ctx.config.ws.maxMessageBytes);
  const handshakes = new Set<Promise<void>>();
  const emit: EmitRow = (row, hold = null, finishReasons) => {
    // A relayed socket's row would put its lifetime (minutes, hours) into the request latency histogram.
    if (row.status !== 101) observeRow(ctx.metrics, row);
    ctx.record(row);
    ctx.limits.settle(hold, row); // a response's hold; null for socket rows
    // A span per response (and per refused handshake); a socket's lifetime is no GenAI operation.
    if (row.status !== 101) ctx.telemetry?.observe(row, row.request_headers, row.model, finishReasons);
  };
  const services: UpgradeServices = { ctx, shutdown, callers, sockets, emit };
  new Gauge({
    name: 'keyrelay_websockets_open',
    help: 'WebSockets relayed right now (caller and upstream both open).',
    registers: [ctx.metrics.registry],
    collect() {
      this.set(sockets.ended.size);
    },
  });

  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => {});
    // Not a WebSocket handshake under the proxy (h2c, a stray Upgrade header, another path): served as the
    // plain request it also is, by the server's own handler.
    if (handshakeProblem(req) || !(req.url ?? '').startsWith(PROXY_PREFIX))
      return servePlain(server, req, socket, head, ctx.config);
    const p = upgrade(services, req, socket, head)
      .catch((err: unknown) => {
        ctx.log.warn({ err }, 'websocket upgrade failed');
        socket.destroy();
      })
      .finally(() => handshakes.delete(p));
    handshakes.add(p);
  });

  return {
    onKeyEvent(e) {
      for (const s of sockets.of(e.type === 'flush_all' ? null : e.key_id)) void s.recheck();
    },
    async drain(graceMs) {
      await Promise.allSettled([...handshakes]);
      if (sockets.ended.size > 0) {
        const deadline = setTimeout(() => {
          for (const s of sockets.of(null)) s.close(1001, 'keyrelay: shutting down', 'proxy_unavailable');
        }, graceMs);
        await Promise.allSettled([...sockets.ended]);
        clearTimeout(deadline);
      }
      callers.close();
    },
    get openSockets() {
      return sockets.ended.size;
    },
  };
}
