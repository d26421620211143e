/**
 * What a client, with or without a key, may hold of the server before it has sent a whole request:
 * connections (in all and per address), time (headers, whole request, silence inside a body), headers, and
 * requests pipelined behind one whose answer closes the connection. Node's own checks (headersTimeout,
 * requestTimeout) stop once a request is received, so none of this ever cuts a long response stream.
 * docs/threat-model.md lists every limit and why its default is what it is.
 */
import { readFileSync } from 'node:fs';
import {
  STATUS_CODES,
  type IncomingMessage,
  type Server,
  type ServerOptions,
  type ServerResponse,
} from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';

/** A real client sends its headers in one round trip; 20 s tolerates a bad mobile link, not a slowloris. */
export const CLIENT_HEADERS_TIMEOUT_MS = 20_000;
/** An uploading client is never silent this long; a slow-body attacker is cut within it. */
export const CLIENT_BODY_IDLE_TIMEOUT_MS = 15_000;
/** SDKs send ~20 header lines; Node itself keeps only ~1,000 and silently drops the rest. */
export const MAX_HEADERS = 100;

export interface GuardLimits {
  /** From the first byte of a request until its last header line. */
  clientHeadersTimeoutMs: number;
  /** From the first byte of a request until its last body byte. */
  clientRequestTimeoutMs: number;
  /** Longest silence between two chunks of a request body. */
  clientBodyIdleTimeoutMs: number;
  /** Open client connections in all; null = 10,000 or 80 % of the descriptor limit, whichever is lower. */
  maxConnections: number | null;
  /** Open client connections per remote address (0 = no cap). */
  maxConnectionsPerIp: number;
  maxHeaders: number;
  trustProxy: boolean;
}

/**
 * Addresses never capped per address: a reverse proxy on the same host and the bench reach keyrelay from
 * these, and every one of their connections shares the address.
 */
const UNCAPPED = new Set(['127.0.0.1', '::1', '::ffff:127.0.0.1']);

/** The soft RLIMIT_NOFILE, from /proc (Linux); null elsewhere. Node raises it to the hard limit at start. */
export function descriptorLimit(): number | null {
  try {
    const m = /^Max open files\s+(\d+)/m.exec(readFileSync('/proc/self/limits', 'latin1'));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

/**
 * Below the descriptor limit with room to spare: each proxied call also needs an upstream socket, and the
 * stores their files, so refusing connections early keeps the ones already accepted working.
 */
export function effectiveMaxConnections(limits: GuardLimits): number {
  if (limits.maxConnections !== null) return limits.maxConnections;
  const fds = descriptorLimit();
  return fds === null ? 10_000 : Math.max(16, Math.min(10_000, Math.floor(fds * 0.8)));
}

export function guardedServerOptions(limits: GuardLimits): ServerOptions {
  return {
    headersTimeout: limits.clientHeadersTimeoutMs,
    requestTimeout: limits.clientRequestTimeoutMs,
    // Node's default (30 s) would let a slow client outlive the timeouts by that much.
    connectionsCheckingInterval: Math.max(
      100,
      Math.min(1_000, limits.clientHeadersTimeoutMs / 4, limits.clientRequestTimeoutMs / 4),
    ),
  };
}

/**
 * Answers that end their connection. Node keeps its own decision private and ends the socket only once the
 * answer's bytes are out, so an answer written at once is finished before then, and a request parsed in
 * between must not run: whoever writes a closing answer marks it here.
 */
const closingAnswers = new WeakSet<ServerResponse>();

/** An answer of keyrelay's own that ends the connection (OpenAI's error shape: it has `code` and `message`). */
function closeWith(res: ServerResponse, status: number, code: string, message: string): void {
  if (res.headersSent || res.destroyed) return void res.destroy();
  closingAnswers.add(res);
  const body = JSON.stringify({ error: { message, type: 'keyrelay_error', code } });
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
    'x-content-type-options': 'nosniff',
    connection: 'close',
  });
  res.end(body);
}

function declaresBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/**
 * A body that stops arriving is answered 408 and its connection closed. The socket's own inactivity timer
 * is used (Node refreshes it on every read), armed only until the body has been read: a response that
 * takes minutes to start or to stream must not be cut. `deadlineMs`, when set, bounds the whole body too.
 */
function guardBody(
  req: IncomingMessage,
  res: ServerResponse,
  idleMs: number,
  deadlineMs: number | null,
): void {
  if (!declaresBody(req)) return;
  const socket = req.socket;
  let armed = true;
  const disarm = (resetSocket: boolean) => {
    if (!armed) return;
    armed = false;
    req.off('timeout', onTimeout);
    if (deadline) clearTimeout(deadline);
    // Once the answer is finished Node has set the socket's keep-alive timer itself: leave it.
    if (resetSocket) socket.setTimeout(0);
  };
  const onTimeout = () => {
    disarm(false);
    closeWith(res, 408, 'request_timeout', 'The request body stopped arriving.');
  };
  const deadline =
    deadlineMs === null
      ? null
      : setTimeout(() => {
          disarm(false);
          closeWith(res, 408, 'request_timeout', 'The request body took too long to arrive.');
        }, deadlineMs);
  deadline?.unref();
  req.on('timeout', onTimeout);
  req.once('end', () => disarm(true));
  res.once('finish', () => disarm(false));
  res.once('close', () => disarm(false));
  socket.setTimeout(idleMs);
}

function endsConnection(res: ServerResponse): boolean {
  if (closingAnswers.has(res)) return true;
  const asked = (res.req.headers.connection ?? '').toLowerCase();
  if (/\bclose\b/.test(asked)) return true;
  return res.req.httpVersion === '1.0' && !/\bkeep-alive\b/.test(asked);
}

/**
 * How long a refused request's body is still read (and thrown away) after its answer: a client that sends
 * its whole upload before reading (most SDKs) must get to read the answer, not a reset; one that writes
 * forever is cut after this.
 */
const LINGER_MS = 10_000;
/** How much of it: a refused upload is usually just over the body limit; past this the client is not listening. */
const LINGER_MAX_BYTES = 64 * 1024 * 1024;

/**
 * Sends an answer written before its request's body was read (a refusal) and ends the connection as
 * nginx's lingering close does. The answer says `connection: close`, so no client sends another request on
 * this connection. Its bytes go out at once, but the response is ended only once the body is in (read and
 * thrown away): ending it is what makes Node close the socket, and closing over unread bytes makes the
 * kernel send a reset, which loses the answer a client still writing its upload has not read yet (most SDKs
 * send the whole body before reading). A client that writes on past LINGER_MS or LINGER_MAX_BYTES is cut.
 */
export function answerBeforeBody(
  req: IncomingMessage,
  res: ServerResponse,
  status: number,
  headers: Record<string, string | number>,
  body: string,
): void {
  closingAnswers.add(res);
  const socket = req.socket;
  let read = 0;
  const timer = setTimeout(() => socket.destroy(), LINGER_MS);
  timer.unref();
  socket.once('close', () => clearTimeout(timer));
  req.on('data', (chunk: Buffer) => {
    read += chunk.length;
    if (read > LINGER_MAX_BYTES) socket.destroy();
  });
  req.once('end', () => res.end());
  req.resume();
  res.writeHead(status, { ...headers, connection: 'close' });
  res.write(body);
}

/**
 * Wraps the request listener: refusals that need no route (too many headers, HTTP/1.0 with
 * Transfer-Encoding), body timeouts, and one request at a time per connection: a pipelined request waits
 * for the answer before it, and is dropped if that answer closed the connection. Requests `smallBody` picks
 * (the console's: 1 MiB at most, and no key needed to send one) must send their whole body within the
 * headers' timeout, not the whole-request one sized for 32 MiB proxy uploads.
 */
export function guardRequests(
  limits: GuardLimits,
  handler: (req: IncomingMessage, res: ServerResponse) => void,
  smallBody: (req: IncomingMessage) => boolean = () => false,
): (req: IncomingMessage, res: ServerResponse) => void {
  const current = new WeakMap<Socket, ServerResponse>();
  const run = (req: IncomingMessage, res: ServerResponse) => {
    writing.set(req.socket, res);
    // Node keeps at most ~1,000 header lines and drops the rest unseen (a repeated proxy-api-key among
    // them): too many is refused, not trimmed.
    if (req.rawHeaders.length / 2 > limits.maxHeaders)
      return closeWith(res, 431, 'too_many_headers', `More than ${limits.maxHeaders} request headers.`);
    // RFC 9112 §6.1: chunked framing does not exist in HTTP/1.0; such a message's length is unknowable.
    if (req.httpVersion === '1.0' && req.headers['transfer-encoding'] !== undefined)
      return closeWith(res, 400, 'bad_request', 'Transfer-Encoding in an HTTP/1.0 request.');
    const deadline = smallBody(req) ? limits.clientHeadersTimeoutMs : null;
    guardBody(req, res, limits.clientBodyIdleTimeoutMs, deadline);
    handler(req, res);
  };
  return (req, res) => {
    const socket = req.socket;
    const before = current.get(socket);
    current.set(socket, res);
    res.once('close', () => {
      if (current.get(socket) === res) current.delete(socket);
    });
    if (!before || before.writableFinished || before.destroyed) {
      if (socket.writableEnded || socket.destroyed || (before && endsConnection(before))) return;
      return run(req, res);
    }
    let started = false;
    const next = () => {
      if (started) return;
      started = true;
      // Node ends the socket (in its own 'finish' listener, which runs first) when that answer said close.
      if (socket.writableEnded || socket.destroyed || endsConnection(before)) return;
      run(req, res);
    };
    before.once('finish', next);
    before.once('close', next);
  };
}

/** Requests whose client holds its body until told to send it (`Expect: 100-continue`), not told yet. */
const holdingBody = new WeakSet<IncomingMessage>();

/**
 * Node answers `Expect: 100-continue` with `100 Continue` at once unless the server listens for
 * `checkContinue`. Requests `holds` picks (the proxy's) are left waiting until `askForBody`, so a refusal
 * by key or declared length goes out before the client uploads anything; the others are told at once.
 */
export function guardContinue(
  server: Server,
  listener: (req: IncomingMessage, res: ServerResponse) => void,
  holds: (req: IncomingMessage) => boolean,
): void {
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    if (holds(req)) holdingBody.add(req);
    else res.writeContinue();
    listener(req, res);
  });
}

/** Tells a client holding its body to send it; nothing for one that never asked to be told. */
export function askForBody(req: IncomingMessage, res: ServerResponse): void {
  if (holdingBody.delete(req)) res.writeContinue();
}

/** The answer each connection is writing or last wrote (later pipelined ones wait for it). */
const writing = new WeakMap<Socket, ServerResponse>();

/** Node's parse and timeout errors that are not a malformed request (400). */
const CLIENT_ERROR_ANSWERS: Record<string, [status: number, code: string, message: string]> = {
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'request_timeout', 'The request took too long to arrive.'],
  HPE_HEADER_OVERFLOW: [431, 'headers_too_large', 'The request headers are too large.'],
};

/**
 * The server's `clientError` handler (bytes that are no request, or a request that took too long): answered
 * in keyrelay's shape and the connection closed. Written only when no answer is part-way out on the
 * connection, as Node's own handler does; its bytes would land inside that answer's.
 */
export function answerClientError(err: NodeJS.ErrnoException, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const answer = writing.get(socket);
  const midAnswer = answer !== undefined && answer.headersSent && !answer.writableFinished;
  if (socket.writable && !midAnswer) {
    const [status, code, message] = CLIENT_ERROR_ANSWERS[err.code ?? ''] ?? [
      400,
      'bad_request',
      'The request is not valid HTTP/1.1.',
    ];
    const body = JSON.stringify({ error: { message, type: 'keyrelay_error', code } });
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: application/json\r\n` +
        `content-length: ${Buffer.byteLength(body)}\r\nx-content-type-options: nosniff\r\n` +
        `connection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(err);
}

/**
 * Connection caps, and errors of the listening socket: at the descriptor limit accept() fails with EMFILE
 * (libuv then accepts and closes the waiting connections itself), which must not end the process; the
 * connections already open finish, and new ones are taken again once descriptors are free.
 */
export function guardConnections(server: Server, limits: GuardLimits, log: Logger): void {
  server.maxConnections = effectiveMaxConnections(limits);
  const perIpCap = limits.trustProxy ? 0 : limits.maxConnectionsPerIp;
  const perIp = new Map<string, number>();
  if (perIpCap > 0) {
    server.on('connection', (socket: Socket) => {
      const ip = socket.remoteAddress;
      if (ip === undefined || UNCAPPED.has(ip)) return;
      const n = (perIp.get(ip) ?? 0) + 1;
      if (n > perIpCap) return void socket.destroy();
      perIp.set(ip, n);
      socket.once('close', () => {
        const left = (perIp.get(ip) ?? 1) - 1;
        if (left === 0) perIp.delete(ip);
        else perIp.set(ip, left);
      });
    });
  }
  let lastWarned = 0;
  server.on('error', (err: NodeJS.ErrnoException) => {
    if (err.syscall !== 'accept') return void log.error({ err }, 'server error');
    const now = Date.now();
    if (now - lastWarned < 10_000) return;
    lastWarned = now;
    log.warn({ code: err.code }, 'cannot accept connections (descriptor limit?); refusing new ones');
  });
}
