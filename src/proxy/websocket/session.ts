/**
 * An open socket pair and its controls: every response.create is checked against the key's limits (model
 * list, rate, budget) before it goes upstream, a refused one is answered with an `error` event (the socket
 * stays open) and logged; a key that stops working (revoked, expired, rolled past its grace) closes the
 * socket with 1008 and keyrelay's code as the reason. When both sides are closed, the socket's row.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type WebSocket from 'ws';
import { ProxyError } from '../../errors.js';
import { newId } from '../../ids.js';
import { socketCreateInfo } from '../../limits/bound.js';
import type { Admission, Hold } from '../../limits/limiter.js';
import { OrderedGate } from '../../limits/ordered-gate.js';
import type { Outcome, RequestLogRow } from '../../types.js';
import { redactHeaders } from '../headers.js';
import type { SocketEvents } from '../../providers/types.js';
import type { WsProxyContext } from './context.js';
import type { SocketFacts, SocketLedger } from './ledger.js';
import { Relay, type RelayEnd, type RelayHooks } from './relay.js';

export interface OpenSocket {
  keyId: string;
  /** Resolves once the socket's rows are handed to the log. */
  ended: Promise<void>;
  recheck(): Promise<void>;
  close(code: number, reason: string, keyrelayCode: string): void;
}

export interface OpenSocketOptions {
  ctx: WsProxyContext;
  caller: WebSocket;
  upstream: WebSocket;
  ledger: SocketLedger;
  facts: SocketFacts;
  /** The key as presented, kept in memory only to re-check it when a key event arrives. */
  presented: string | undefined;
  ttfbMs: number;
  upstreamHeaders: IncomingHttpHeaders;
  emit: (row: RequestLogRow) => void;
}

/** A message that may be a response.create but does not parse: refused, since it could not be checked. */
const UNREADABLE = new ProxyError('proxy_bad_request', 'A response.create that is not valid JSON.');

/** setTimeout's ceiling; a later expiry is re-armed by the key events that will come before it. */
const MAX_TIMER_MS = 2_147_483_647;

export function openSocket(o: OpenSocketOptions): OpenSocket {
  const { ctx, caller, upstream, ledger, facts } = o;
  let resolveEnded!: () => void;
  const ended = new Promise<void>((r) => (resolveEnded = r));
  let expiryTimer: NodeJS.Timeout | null = null;

  // Decides an admitted or refused response.create: true sends it upstream.
  const decide = (
    events: SocketEvents,
    event: Record<string, unknown>,
    data: Buffer,
    admitted: Admission,
  ): boolean => {
    const refusal = admitted instanceof ProxyError ? admitted : null;
    if (!refusal) {
      ctx.lastUsed.mark(facts.key.id, new Date().toISOString()); // a socket may live for hours
      ledger.onCreate(event, data.length, admitted as Hold | null);
      return true;
    }
    const clientEventId = typeof event.event_id === 'string' ? event.event_id : null;
    caller.send(
      events.renderErrorEvent(
        facts.protocol,
        refusal.code,
        refusal.message,
        refusal.status,
        clientEventId,
        `event_kr_${newId()}`,
      ),
    );
    ledger.refused(event, data.length, refusal.status, refusal.code);
    return false;
  };

  const hooks: RelayHooks = {
    fromCaller(data, isBinary) {
      if (gate.waiting) return gate.defer(data, isBinary); // in order behind a create being admitted
      const events = facts.events;
      if (!events || facts.protocol === 'other') return true;
      const event = events.parseClientCreate(data);
      if (event === null) return true;
      if (event === 'unreadable') return decide(events, {}, data, UNREADABLE);
      // Each create is admitted like an HTTP request: limits, and a hold settled with its response's row.
      const admitted = ctx.limits.admit(
        facts.key,
        facts.provider,
        socketCreateInfo(facts.provider, ledger.modelOf(event), event),
        'POST',
      );
      if (!(admitted instanceof Promise)) return decide(events, event, data, admitted);
      const release = (a: Admission) => a instanceof ProxyError || ctx.limits.settle(a, null);
      return gate.wait(admitted, data, (a) => decide(events, event, data, a), release);
    },
    fromUpstream(data, isBinary) {
      if (facts.protocol !== 'other' && !isBinary) ledger.onServerText(data);
    },
    closed(end) {
      gate.close();
      if (expiryTimer) clearTimeout(expiryTimer);
      ledger.closeAll(end.by === 'upstream' && end.abnormal ? 'upstream_error' : 'client_aborted');
      o.emit(
        ledger.socketRow({
          status: 101,
          outcome: socketOutcome(end),
          errorCode: end.keyrelayCode,
          ttfbMs: o.ttfbMs,
          messagesIn: relay.stats.messagesIn,
          messagesOut: relay.stats.messagesOut,
          bytesIn: relay.stats.bytesIn,
          bytesOut: relay.stats.bytesOut,
          closeCode: end.code,
          closeReason: end.reason || null,
          responseHeaders: redactHeaders(o.upstreamHeaders),
        }),
      );
      if (end.keyrelayCode === 'proxy_ws_buffer_exceeded' || (end.abnormal && end.by === 'upstream')) {
        ctx.log.warn({ reqId: facts.id, code: end.keyrelayCode, reason: end.reason }, 'websocket cut');
      }
      resolveEnded();
    },
  };
  const relay = new Relay(caller, upstream, ctx.config.ws, hooks);

  const gate = new OrderedGate<Admission>(
    (d, b) => hooks.fromCaller(d, b),
    (d, b) => relay.sendUpstream(d, b),
  );

  const armExpiry = (expiresAt: string | null) => {
    if (expiryTimer) clearTimeout(expiryTimer);
    expiryTimer = null;
    if (!expiresAt) return;
    const wait = Date.parse(expiresAt) - Date.now();
    if (wait > MAX_TIMER_MS) return;
    expiryTimer = setTimeout(() => void self.recheck(), Math.max(wait, 0) + 5);
    expiryTimer.unref();
  };

  const self: OpenSocket = {
    keyId: facts.key.id,
    ended,
    async recheck() {
      const checked = await ctx.keys.check(o.presented);
      // An unreachable key store is not a revocation: the socket stays, the next event re-checks.
      if (!checked.ok && checked.error.code !== 'proxy_unavailable') {
        relay.close(1008, `keyrelay: ${checked.error.code}`, checked.error.code);
        return;
      }
      const key = checked.key;
      if (key) {
        facts.key = key; // changed limits apply to the next response.create
        armExpiry(key.expires_at);
      }
    },
    close(code, reason, keyrelayCode) {
      relay.close(code, reason, keyrelayCode);
    },
  };
  armExpiry(facts.key.expires_at);
  return self;
}

function socketOutcome(end: RelayEnd): Outcome {
  if (end.by === 'keyrelay') {
    if (end.keyrelayCode === 'proxy_ws_idle_timeout') return 'timeout';
    if (end.keyrelayCode?.startsWith('proxy_key')) return 'refused';
    return end.keyrelayCode === 'proxy_ws_buffer_exceeded' ? 'client_aborted' : 'ok';
  }
  if (end.abnormal) return end.by === 'upstream' ? 'upstream_error' : 'client_aborted';
  return 'ok';
}
