/**
 * Accounting for one socket: each model response is one log row (from the response.create that asked for
 * it, or the response.created the server began on its own, to the end event), and the socket is one more
 * row when it closes. Rows are built by the HTTP path's toLogRow, so the fields mean the same things.
 */
import type { IncomingMessage } from 'node:http';
import { performance } from 'node:perf_hooks';
import { newTimedId } from '../../ids.js';
import type { Hold } from '../../limits/limiter.js';
import type { EmitRow } from './context.js';
import type { Outcome, Provider, RequestLogRow } from '../../types.js';
import type { KeyRecord } from '../../store/types.js';
import type { Usage } from '../../usage/index.js';
import { newExchange, toLogRow, type RowSettings } from '../exchange.js';
import type { SocketEvents, SocketProtocol } from '../../providers/types.js';

export interface SocketFacts {
  id: string; // the socket row's id, and every row's connection_id
  createdAt: string;
  startedAt: number; // performance.now()
  provider: Provider;
  path: string;
  key: KeyRecord;
  /** The upgrade request with credential-bearing subprotocol entries redacted. */
  req: IncomingMessage;
  protocol: SocketProtocol;
  /** The provider's WebSocket events; null where keyrelay reads none (the socket is only relayed). */
  events: SocketEvents | null;
  logBodies: boolean;
  endUser: string | null;
  credentialFingerprint: string | null;
}

interface Pending {
  id: string;
  createdAt: string;
  startedAt: number;
  payload: string | null;
  payloadBytes: number;
  clientEventId: string | null;
  responseId: string | null;
  ttfbMs: number | null;
  model: string | null;
  responseBytes: number;
  /** The limits' hold for this response, settled with its row. */
  hold: Hold | null;
}

const NO_USAGE: Usage = {
  input_tokens: null,
  cache_read_tokens: null,
  cache_write_tokens: null,
  output_tokens: null,
  reasoning_tokens: null,
  source: 'none',
  model: null,
};

export class SocketLedger {
  /** In order of creation; OpenAI answers a socket's responses in order. */
  private pending: Pending[] = [];
  /** The session's model (URL `?model=`, then session.created/updated); Responses name it per create. */
  model: string | null;
  responses = 0;

  constructor(
    private readonly ctx: RowSettings,
    private readonly facts: SocketFacts,
    private readonly emit: EmitRow,
  ) {
    this.model = modelFromQuery(facts.path);
  }

  /** A response.create the caller sent (already admitted by the limits). */
  onCreate(event: Record<string, unknown>, bytes: number, hold: Hold | null = null): void {
    const now = performance.now();
    const { id, at } = newTimedId();
    this.pending.push({
      id,
      createdAt: at,
      startedAt: now,
      payload: this.forLog(event),
      payloadBytes: bytes,
      clientEventId: typeof event.event_id === 'string' ? event.event_id : null,
      responseId: null,
      ttfbMs: null,
      model: this.modelOf(event),
      responseBytes: 0,
      hold,
    });
  }

  /** The model a response.create will use: its own (`model`, or Realtime's `response.model`) or the session's. */
  modelOf(event: Record<string, unknown>): string | null {
    if (typeof event.model === 'string' && event.model) return event.model;
    const r = event.response;
    if (typeof r === 'object' && r !== null && typeof (r as { model?: unknown }).model === 'string')
      return (r as { model: string }).model;
    return this.model;
  }

  /** A refused response.create: its row, never sent upstream. */
  refused(event: Record<string, unknown>, bytes: number, status: number, code: string): void {
    this.onCreate(event, bytes);
    const p = this.pending.pop()!;
    this.emitRow(p, performance.now(), {
      status,
      outcome: 'refused',
      errorCode: code,
      usage: NO_USAGE,
      body: null,
    });
  }

  /** Every server message as text (binary ones are not events). */
  onServerText(data: Buffer): void {
    const events = this.facts.events;
    const type = events?.peekServerType(data) ?? null;
    if (!events || type === null) return;
    const kind = events.kindOf(type);
    const bytes = data.length;
    // Only the events read below are decoded in full; deltas and everything else never are.
    const json = () => parseJsonObject(data.toString('utf8'));
    const now = performance.now();
    if (kind === 'delta') {
      const p = this.current(null);
      if (p) {
        p.responseBytes += bytes;
        if (p.ttfbMs === null) p.ttfbMs = now - p.startedAt;
      }
      return;
    }
    if (kind === 'session') {
      const session = json()?.session as { model?: unknown } | undefined;
      if (typeof session?.model === 'string' && session.model) this.model = session.model;
      return;
    }
    if (kind === 'created') {
      const response = json()?.response as Record<string, unknown> | undefined;
      const rid = typeof response?.id === 'string' ? response.id : null;
      let p = this.pending.find((x) => x.responseId === null);
      if (!p) {
        // Started by the server (Realtime voice activity detection): timed from here.
        p = this.newPending(now, this.model);
        this.pending.push(p);
      }
      p.responseId = rid;
      p.responseBytes += bytes;
      return;
    }
    if (kind === 'end') {
      const event = json();
      const response = (event?.response ?? {}) as Record<string, unknown>;
      const rid = typeof response.id === 'string' ? response.id : null;
      const p = this.take(rid) ?? this.newPending(now, this.model);
      p.responseBytes += bytes;
      const status = typeof response.status === 'string' ? response.status : null;
      const failed = events.failed(type, status);
      const usage = events.usageFromResponse(response, p.model ?? this.model);
      this.emitRow(p, now, {
        status: failed ? 500 : 200,
        outcome: failed ? 'upstream_error' : 'ok',
        errorCode: null,
        usage,
        body: this.forLog(response),
      });
      return;
    }
    if (kind === 'error') {
      // Upstream refused a response.create (bad parameters, its own rate limit): that request's row.
      const event = json();
      const err = (event?.error ?? {}) as { event_id?: unknown };
      const byId =
        typeof err.event_id === 'string'
          ? this.pending.findIndex((x) => x.clientEventId === err.event_id && x.responseId === null)
          : -1;
      const i =
        byId !== -1
          ? byId
          : this.facts.protocol === 'responses'
            ? this.pending.findIndex((x) => x.responseId === null)
            : -1;
      if (i === -1) return;
      const [p] = this.pending.splice(i, 1);
      this.emitRow(p!, now, {
        status: typeof event?.status === 'number' ? event.status : 400,
        outcome: 'upstream_error',
        errorCode: null,
        usage: NO_USAGE,
        body: this.forLog(event),
      });
    }
  }

  /** Responses still open when the socket ends: a row each, cut short. */
  closeAll(outcome: Outcome): void {
    const now = performance.now();
    for (const p of this.pending.splice(0)) {
      this.emitRow(p, now, { status: 0, outcome, errorCode: null, usage: NO_USAGE, body: null });
    }
  }

  /** An event's JSON for the log, or null when the key's requests keep no bodies. */
  private forLog(value: unknown): string | null {
    if (!this.facts.logBodies) return null;
    return this.facts.events ? this.facts.events.forLog(value) : JSON.stringify(value);
  }

  private newPending(now: number, model: string | null): Pending {
    const { id, at } = newTimedId();
    return {
      id,
      createdAt: at,
      startedAt: now,
      payload: null,
      payloadBytes: 0,
      clientEventId: null,
      responseId: null,
      ttfbMs: null,
      model,
      responseBytes: 0,
      hold: null,
    };
  }

  private current(rid: string | null): Pending | undefined {
    if (rid !== null) return this.pending.find((p) => p.responseId === rid);
    return this.pending.find((p) => p.responseId !== null) ?? this.pending[0];
  }

  private take(rid: string | null): Pending | undefined {
    let i = rid === null ? -1 : this.pending.findIndex((p) => p.responseId === rid);
    if (i === -1) i = this.pending.findIndex((p) => p.responseId === null || rid === null);
    if (i === -1) return undefined;
    return this.pending.splice(i, 1)[0];
  }

  private emitRow(
    p: Pending,
    endedAt: number,
    r: { status: number; outcome: Outcome; errorCode: string | null; usage: Usage; body: string | null },
  ): void {
    const f = this.facts;
    const ex = newExchange({ id: p.id, at: p.createdAt }, p.startedAt);
    ex.provider = f.provider;
    ex.path = f.path;
    ex.key = f.key;
    ex.info = {
      provider: f.provider,
      path: f.path,
      model: p.model,
      stream: true,
      end_user: f.endUser,
      json: null,
    };
    ex.requestBody = p.payload === null ? null : Buffer.from(p.payload);
    ex.logBodies = f.logBodies;
    ex.status = r.status;
    ex.outcome = r.outcome;
    ex.errorCode = r.errorCode;
    ex.ttfbMs = p.ttfbMs;
    ex.responseBytes = p.responseBytes;
    ex.usage = r.usage;
    ex.responseBody = clip(r.body, this.ctx.config.bodyLogBytes);
    const row = toLogRow(ex, f.req, this.ctx, endedAt);
    row.method = 'WS';
    row.request_bytes = p.payloadBytes;
    row.connection_id = f.id;
    row.input_audio_tokens = r.usage.input_audio_tokens ?? null;
    row.cache_read_audio_tokens = r.usage.cache_read_audio_tokens ?? null;
    row.output_audio_tokens = r.usage.output_audio_tokens ?? null;
    row.credential_fingerprint ??= f.credentialFingerprint;
    this.responses++;
    this.emit(row, p.hold, r.usage.finish_reasons);
  }

  /** The socket's own row, written when it closes. Usage stays on the response rows (no double count). */
  socketRow(s: {
    status: number;
    outcome: Outcome;
    errorCode: string | null;
    ttfbMs: number | null;
    messagesIn: number;
    messagesOut: number;
    bytesIn: number;
    bytesOut: number;
    closeCode: number | null;
    closeReason: string | null;
    responseHeaders: Record<string, string | string[]>;
    responseBody?: string | null;
  }): RequestLogRow {
    const f = this.facts;
    const ex = newExchange({ id: f.id, at: f.createdAt }, f.startedAt);
    ex.provider = f.provider;
    ex.path = f.path;
    ex.key = f.key;
    ex.info = {
      provider: f.provider,
      path: f.path,
      model: this.model,
      stream: true,
      end_user: f.endUser,
      json: null,
    };
    ex.logBodies = f.logBodies;
    ex.status = s.status;
    ex.outcome = s.outcome;
    ex.errorCode = s.errorCode;
    ex.ttfbMs = s.ttfbMs;
    ex.responseBytes = s.bytesOut;
    ex.responseHeaders = s.responseHeaders;
    ex.responseBody = clip(s.responseBody ?? null, this.ctx.config.bodyLogBytes);
    const row = toLogRow(ex, f.req, this.ctx, performance.now());
    row.request_bytes = s.bytesIn;
    row.connection_id = f.id;
    row.ws_messages_in = s.messagesIn;
    row.ws_messages_out = s.messagesOut;
    row.ws_close_code = s.closeCode;
    row.ws_close_reason = s.closeReason === null ? null : s.closeReason.slice(0, 256);
    row.credential_fingerprint ??= f.credentialFingerprint;
    return row;
  }
}

function clip(text: string | null, limit: number): { text: string | null; truncated: boolean } {
  if (text === null || limit <= 0) return { text: null, truncated: false };
  const buf = Buffer.from(text);
  if (buf.length <= limit) return { text, truncated: false };
  // Cut on a character boundary: a split UTF-8 sequence would decode to U+FFFD.
  let end = limit;
  while (end > 0 && (buf[end]! & 0xc0) === 0x80) end--;
  return { text: buf.subarray(0, end).toString('utf8'), truncated: true };
}

function modelFromQuery(path: string): string | null {
  const q = path.indexOf('?');
  if (q === -1) return null;
  const model = new URLSearchParams(path.slice(q + 1)).get('model');
  return model ? model.slice(0, 256) : null;
}

function parseJsonObject(text: string): Record<string, unknown> | null {
  try {
    const v: unknown = JSON.parse(text);
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}
