/**
 * Step 4, forward: the request goes upstream on the shared pool. A caller that goes away aborts the
 * upstream request at once, also while waiting for the first byte, and so does shutdown past its deadline.
 */
import { EventEmitter } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Dispatcher } from 'undici';
import type { ProxyServices, Shutdown } from './context.js';
import { forwardRequestHeaders } from './headers.js';
import { classifyUpstreamError, type UpstreamFailure } from './upstream-errors.js';

/**
 * Watches the caller for the whole exchange, forward and stream back. undici takes an EventEmitter as its
 * signal: cheaper than an AbortController per request. A 'close' after a complete response is not an abort
 * (aborting then would cost the pooled upstream connection).
 */
export class CallerWatch {
  readonly signal = new EventEmitter();
  aborted = false;
  private readonly onClose = () => {
    if (this.aborted || this.res.writableFinished) return;
    this.aborted = true;
    this.signal.emit('abort');
  };

  constructor(
    private readonly res: ServerResponse,
    private readonly inflight: Shutdown['inflight'],
  ) {
    res.once('close', this.onClose);
    inflight.add(this.onClose);
  }

  /** No longer in flight: shutdown has nothing to cut. */
  settled(): void {
    this.inflight.delete(this.onClose);
  }

  release(): void {
    this.inflight.delete(this.onClose);
    this.res.off('close', this.onClose);
  }
}

export type Forwarded =
  | { ok: true; upstream: Dispatcher.ResponseData }
  | { ok: false; aborted: true }
  | { ok: false; aborted: false; failure: UpstreamFailure };

export interface Destination {
  origin: string;
  /** Path and query exactly as received and validated (proxy/target.ts). */
  path: string;
  body: Buffer;
}

export async function forward(
  s: ProxyServices,
  req: IncomingMessage,
  res: ServerResponse,
  to: Destination,
  watch: CallerWatch,
): Promise<Forwarded> {
  try {
    // The dispatcher, not undici's request(url): that parses a URL, which would re-encode the caller's
    // path and query (e.g. ' → %27); the path goes upstream exactly as received and validated.
    const upstream = await s.dispatcher.request({
      origin: to.origin,
      path: to.path,
      method: req.method as Dispatcher.HttpMethod,
      headers: forwardRequestHeaders(req.rawHeaders, req.headers.connection),
      body: to.body.length > 0 || (req.method !== 'GET' && req.method !== 'HEAD') ? to.body : undefined,
      signal: watch.signal,
      headersTimeout: s.config.headersTimeoutMs,
      bodyTimeout: s.config.idleTimeoutMs,
    });
    return { ok: true, upstream };
  } catch (err) {
    watch.settled();
    if (res.destroyed || watch.aborted) return { ok: false, aborted: true };
    return { ok: false, aborted: false, failure: classifyUpstreamError(err) };
  }
}
