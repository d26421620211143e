/**
 * Steps 4 and 5 as undici drives them: the request goes upstream on the shared pool, and the answer comes
 * back through one dispatch handler that writes each piece to the caller as it arrives, with backpressure.
 * No response stream, pipe or promise in between: undici's request() would add a Readable per response and
 * a stream hop per chunk (measured in docs/performance.md). A caller that goes away aborts the upstream
 * request at once, also while waiting for the first byte, and so does shutdown past its deadline.
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { Transform, type Writable } from 'node:stream';
import type { Dispatcher } from 'undici';
import type { BodyRewrite } from '../usage/index.js';
import type { ProxyServices, Shutdown } from './context.js';
import { forwardRequestHeaders } from './headers.js';
import { classifyUpstreamError, type UpstreamFailure } from './upstream-errors.js';

export class CallerClosedError extends Error {
  override name = 'CallerClosedError';
}

/**
 * Watches the caller for the whole exchange, forward and stream back. A 'close' after a complete response
 * is not an abort (aborting then would cost the pooled upstream connection).
 */
export class CallerWatch {
  aborted = false;
  /** Cuts the upstream call; set by it while it runs. */
  cut: (() => void) | null = null;
  private readonly onClose = () => {
    if (this.aborted || this.res.writableFinished) return;
    this.aborted = true;
    this.cut?.();
  };

  constructor(
    private readonly res: ServerResponse,
    private readonly inflight: Shutdown['inflight'],
  ) {
    res.once('close', this.onClose);
    inflight.add(this.onClose);
  }

  release(): void {
    this.cut = null;
    this.inflight.delete(this.onClose);
    this.res.off('close', this.onClose);
  }
}

/** Where the answer goes (proxy/stream-back.ts); called synchronously from undici's parser. */
export interface ResponseSink {
  /**
   * The final head arrived: answer the caller's head. Returns what the body goes through on its way: a
   * transform piped to the caller, a rewrite that writes to the caller itself, or nothing.
   */
  start(statusCode: number, headers: IncomingHttpHeaders): Transform | BodyRewrite | null;
  /** Each body piece as upstream sent it, before it is written on. */
  data(chunk: Buffer): void;
}

export type Forwarded =
  /** The head went to the caller; `cut` is why the body stopped short, null when every byte went out. */
  | { ok: true; cut: Error | null }
  | { ok: false; aborted: true }
  | { ok: false; aborted: false; failure: UpstreamFailure };

export interface Destination {
  origin: string;
  /** Path and query exactly as received and validated (proxy/target.ts). */
  path: string;
  body: Buffer;
}

/** Resolves once the caller's response is finished or cut; rejects only if `sink.start` throws. */
export function forward(
  s: ProxyServices,
  req: IncomingMessage,
  res: ServerResponse,
  to: Destination,
  watch: CallerWatch,
  sink: ResponseSink,
): Promise<Forwarded> {
  return new Promise((resolve, reject) => {
    const call = new UpstreamCall(res, watch, sink, resolve, reject);
    // The dispatcher, not undici's request(url): that parses a URL, which would re-encode the caller's
    // path and query (e.g. ' → %27); the path goes upstream exactly as received and validated.
    s.dispatcher.dispatch(
      {
        origin: to.origin,
        path: to.path,
        method: req.method as Dispatcher.HttpMethod,
        headers: forwardRequestHeaders(req.rawHeaders, req.headers.connection),
        body: to.body.length > 0 || (req.method !== 'GET' && req.method !== 'HEAD') ? to.body : undefined,
        headersTimeout: s.config.headersTimeoutMs,
        bodyTimeout: s.config.idleTimeoutMs,
      },
      call,
    );
  });
}

/** One upstream request and its answer's way to the caller. Settles exactly once. */
class UpstreamCall implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | null = null;
  /** Set once the head is answered: the caller's response, or a transform piped into it. */
  private out: Writable | null = null;
  private rewrite: BodyRewrite | null = null;
  private settled = false;

  constructor(
    private readonly res: ServerResponse,
    private readonly watch: CallerWatch,
    private readonly sink: ResponseSink,
    private readonly resolve: (r: Forwarded) => void,
    private readonly reject: (err: unknown) => void,
  ) {
    watch.cut = () => this.fail(new CallerClosedError('caller closed the connection'));
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    // Again on a retry: the latest is the one to abort.
    this.controller = controller;
    if (this.settled) controller.abort(new CallerClosedError('caller closed the connection'));
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
  ): void {
    if (statusCode < 200 || this.settled) return; // 1xx: the final head follows
    let through: Transform | BodyRewrite | null;
    try {
      through = this.sink.start(statusCode, headers);
    } catch (err) {
      // keyrelay's own failure, not upstream's: handled as any other (proxy/answer.ts, failInternally).
      this.settled = true;
      this.watch.release();
      controller.abort(err instanceof Error ? err : new Error(String(err)));
      return this.reject(err);
    }
    if (through instanceof Transform) {
      this.out = through;
      through.once('error', this.onOutError).pipe(this.res);
    } else {
      this.out = this.res;
      this.rewrite = through;
    }
    this.out.on('drain', this.onDrain);
    this.res.once('finish', this.onFinish);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.settled) return;
    this.sink.data(chunk);
    if (this.rewrite) this.rewrite.push(chunk);
    else this.out!.write(chunk);
    if (this.out!.writableNeedDrain) controller.pause();
  }

  onResponseEnd(): void {
    if (this.settled) return;
    this.rewrite?.end();
    this.out!.end();
  }

  onResponseError(_controller: Dispatcher.DispatchController, err: Error): void {
    this.fail(err);
  }

  private readonly onDrain = () => this.controller?.resume();
  private readonly onOutError = (err: Error) => this.fail(err);

  private readonly onFinish = () => {
    if (this.settled) return;
    this.settled = true;
    this.detach();
    this.resolve({ ok: true, cut: null });
  };

  /** Upstream failed, the transform failed, or the caller left: nothing may keep reading or writing. */
  private fail(err: Error): void {
    if (this.settled) return;
    this.settled = true; // first: abort() calls onResponseError at once
    this.detach();
    this.controller?.abort(err); // a no-op once upstream's answer is complete
    const out = this.out;
    if (!out) return this.resolve(beforeHead(this.res, this.watch, err));
    if (out !== this.res) out.destroy(); // pipe() would leave it open
    this.resolve({ ok: true, cut: err });
  }

  private detach(): void {
    this.watch.cut = null;
    this.res.off('finish', this.onFinish);
    if (this.out) {
      this.out.off('drain', this.onDrain);
      this.out.off('error', this.onOutError);
    }
  }
}

function beforeHead(res: ServerResponse, watch: CallerWatch, err: Error): Forwarded {
  // No longer in flight: shutdown has nothing to cut.
  watch.release();
  if (res.destroyed || watch.aborted) return { ok: false, aborted: true };
  return { ok: false, aborted: false, failure: classifyUpstreamError(err) };
}
