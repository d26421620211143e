/**
 * One relayed socket pair, after both handshakes: messages pass unchanged both ways (text stays text,
 * binary stays binary), pings and pongs pass end to end, close codes and reasons pass both ways. Flow
 * control per direction, pings and pongs counted like messages: above the high-water mark of bytes waiting
 * to go out to one side, the other side is paused (its TCP window closes, so a fast sender slows down
 * instead of filling memory); above the cap, both are closed and the reason logged.
 */
import type WebSocket from 'ws';
import type { RawData } from 'ws';

/** A Realtime session can sit quiet for minutes between turns; ten without a message or ping is gone. */
export const WS_IDLE_TIMEOUT_MS = 600_000;
/** Waiting bytes that pause the other side: a few audio chunks, small enough to keep memory flat. */
export const WS_HIGH_WATER_BYTES = 1024 * 1024;
/** Waiting bytes past which a side that does not read is cut: twice the default largest message. */
export const WS_MAX_BUFFER_BYTES = 32 * 1024 * 1024;

export interface RelayLimits {
  idleTimeoutMs: number;
  highWaterBytes: number;
  maxBufferBytes: number;
}

export type Side = 'caller' | 'upstream';

export interface RelayHooks {
  /** Each message from the caller before it goes upstream; false keeps it from upstream (refused). */
  fromCaller(data: Buffer, isBinary: boolean): boolean;
  fromUpstream(data: Buffer, isBinary: boolean): void;
  /** Once, when both sides are done: who ended it, with which code and reason. */
  closed(end: RelayEnd): void;
}

export interface RelayEnd {
  by: Side | 'keyrelay';
  code: number;
  reason: string;
  /** keyrelay's reason code when keyrelay ended it (idle, buffer cap, revoked, draining). */
  keyrelayCode: string | null;
  /** A side went away without a close frame. */
  abnormal: boolean;
}

export interface RelayStats {
  messagesIn: number; // caller → upstream
  messagesOut: number;
  bytesIn: number;
  bytesOut: number;
}

/** While a side is paused, how often the other side's buffer is checked (only paused sockets poll). */
const DRAIN_CHECK_MS = 10;

/** How long a side gets to answer our close frame before its socket is destroyed. */
const CLOSE_GRACE_MS = 1_000;

/** Codes a close frame may carry (RFC 6455 §7.4); others (1005, 1006, 1015) describe, never travel. */
function sendable(code: number): boolean {
  return (
    (code >= 1000 && code <= 1014 && code !== 1004 && code !== 1005 && code !== 1006) ||
    (code >= 3000 && code <= 4999)
  );
}

const toBuffer = (d: RawData): Buffer =>
  Buffer.isBuffer(d) ? d : Array.isArray(d) ? Buffer.concat(d) : Buffer.from(d);

export class Relay {
  readonly stats: RelayStats = { messagesIn: 0, messagesOut: 0, bytesIn: 0, bytesOut: 0 };
  private ended = false;
  private end: RelayEnd | null = null;
  private idleTimer: NodeJS.Timeout | null = null;
  private lastActivity = Date.now();
  private paused: Record<Side, boolean> = { caller: false, upstream: false };

  constructor(
    private readonly caller: WebSocket,
    private readonly upstream: WebSocket,
    private readonly limits: RelayLimits,
    private readonly hooks: RelayHooks,
  ) {
    caller.on('message', (data, isBinary) => {
      const buf = toBuffer(data);
      this.stats.messagesIn++;
      this.stats.bytesIn += buf.length;
      this.touch();
      if (this.hooks.fromCaller(buf, isBinary)) this.forward('upstream', buf, isBinary);
    });
    upstream.on('message', (data, isBinary) => {
      const buf = toBuffer(data);
      this.stats.messagesOut++;
      this.stats.bytesOut += buf.length;
      this.touch();
      this.hooks.fromUpstream(buf, isBinary);
      this.forward('caller', buf, isBinary);
    });
    // End to end: neither side answers pings itself (autoPong off), the far side does.
    caller.on('ping', (d) => this.control('upstream', 'ping', d));
    caller.on('pong', (d) => this.control('upstream', 'pong', d));
    upstream.on('ping', (d) => this.control('caller', 'ping', d));
    upstream.on('pong', (d) => this.control('caller', 'pong', d));
    caller.on('close', (code, reason) => this.onClose('caller', code, reason));
    upstream.on('close', (code, reason) => this.onClose('upstream', code, reason));
    // 'close' follows every 'error'; errors (a bad frame, an oversized message) close the socket themselves.
    caller.on('error', () => {});
    upstream.on('error', () => {});
    this.armIdle();
    upstream.resume();
  }

  private socketOf(side: Side): WebSocket {
    return side === 'caller' ? this.caller : this.upstream;
  }

  private forward(to: Side, data: Buffer, binary: boolean): void {
    const ws = this.socketOf(to);
    if (ws.readyState !== 1) return;
    ws.send(data, { binary });
    this.checkBuffer(to);
  }

  /**
   * After anything is queued for `to`, a message or a ping or pong: a flood of small control frames fills
   * memory as surely as large messages do.
   */
  private checkBuffer(to: Side): void {
    // ws's bufferedAmount: bytes handed to it and not yet written to its socket (no callback per message).
    const queued = this.socketOf(to).bufferedAmount;
    if (queued > this.limits.maxBufferBytes) {
      const reason = to === 'caller' ? 'caller not reading' : 'upstream not reading';
      this.terminate(1008, `keyrelay: ${reason} (buffer cap)`, 'proxy_ws_buffer_exceeded');
    } else if (queued > this.limits.highWaterBytes && !this.paused[other(to)]) this.pause(other(to));
  }

  /** Stops reading `side` until what waits for the other side is below half the high-water mark. */
  private pause(side: Side): void {
    this.paused[side] = true;
    this.socketOf(side).pause();
    const target = this.socketOf(other(side));
    const check = setInterval(() => {
      if (this.end || target.readyState !== 1) clearInterval(check);
      else if (target.bufferedAmount <= this.limits.highWaterBytes / 2) {
        clearInterval(check);
        this.paused[side] = false;
        this.socketOf(side).resume();
      }
    }, DRAIN_CHECK_MS);
    check.unref();
  }

  private control(to: Side, kind: 'ping' | 'pong', data: Buffer): void {
    this.touch();
    const ws = this.socketOf(to);
    if (ws.readyState !== 1) return;
    if (kind === 'ping') ws.ping(data);
    else ws.pong(data);
    this.checkBuffer(to);
  }

  private touch(): void {
    this.lastActivity = Date.now();
  }

  /** One timer per socket, re-armed lazily: cheaper than resetting it on every message. */
  private armIdle(): void {
    const wait = this.lastActivity + this.limits.idleTimeoutMs - Date.now();
    this.idleTimer = setTimeout(
      () => {
        if (this.ended) return;
        if (Date.now() - this.lastActivity >= this.limits.idleTimeoutMs) {
          this.close(1001, 'keyrelay: idle timeout', 'proxy_ws_idle_timeout');
        } else this.armIdle();
      },
      Math.max(wait, 10),
    );
    this.idleTimer.unref();
  }

  /** keyrelay ends the pair: a close frame to both sides (code and reason), then their sockets. */
  /** A caller message held back by fromCaller (waiting for its admission), sent now. */
  sendUpstream(data: Buffer, isBinary: boolean): void {
    if (!this.ended) this.forward('upstream', data, isBinary);
  }

  close(code: number, reason: string, keyrelayCode: string): void {
    if (this.end) return;
    this.end = { by: 'keyrelay', code, reason, keyrelayCode, abnormal: false };
    for (const ws of [this.caller, this.upstream]) closeWithGrace(ws, code, reason);
  }

  /** Like close, but the side that does not read cannot take a close frame: its socket is cut. */
  private terminate(code: number, reason: string, keyrelayCode: string): void {
    if (this.end) return;
    this.end = { by: 'keyrelay', code, reason, keyrelayCode, abnormal: false };
    for (const ws of [this.caller, this.upstream]) {
      if (ws.bufferedAmount > this.limits.maxBufferBytes) ws.terminate();
      else closeWithGrace(ws, code, reason);
    }
  }

  private onClose(side: Side, code: number, reasonBuf: Buffer): void {
    const reason = reasonBuf.toString('utf8');
    const otherWs = this.socketOf(other(side));
    if (!this.end) {
      // 1006: the side went away without a close frame. The other side is told so abnormally too: a caller
      // whose upstream dropped must never see a clean 1000 that looks complete.
      const abnormal = code === 1006;
      this.end = { by: side, code, reason, keyrelayCode: null, abnormal };
      if (abnormal && side === 'upstream')
        closeWithGrace(otherWs, 1011, 'keyrelay: upstream connection lost');
      else if (abnormal) closeWithGrace(otherWs, 1001, 'keyrelay: caller went away');
      else if (sendable(code)) closeWithGrace(otherWs, code, reason);
      else closeWithGrace(otherWs, undefined, undefined);
    }
    if (this.caller.readyState === 3 && this.upstream.readyState === 3) this.finish();
  }

  private finish(): void {
    if (this.ended) return;
    this.ended = true;
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.hooks.closed(this.end!);
  }
}

function other(side: Side): Side {
  return side === 'caller' ? 'upstream' : 'caller';
}

function closeWithGrace(ws: WebSocket, code: number | undefined, reason: string | undefined): void {
  if (ws.readyState === 3) return;
  try {
    if (ws.readyState === 1) ws.close(code, reason === undefined ? undefined : clipReason(reason));
    else ws.terminate();
  } catch {
    ws.terminate();
  }
  setTimeout(() => ws.terminate(), CLOSE_GRACE_MS).unref();
}

/** A close reason fits 123 bytes; cut on a character boundary (a split sequence is invalid UTF-8: 1007). */
function clipReason(reason: string): Buffer {
  const buf = Buffer.from(reason);
  if (buf.length <= 123) return buf;
  let end = 123;
  while (end > 0 && (buf[end]! & 0xc0) === 0x80) end--;
  return buf.subarray(0, end);
}
