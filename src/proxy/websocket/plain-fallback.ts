/**
 * Node hands every request with an Upgrade header to the 'upgrade' listener once there is one, so without
 * this a curl `--http2` (Upgrade: h2c) or any request naming an upgrade it does not need would be lost. A
 * server may ignore Upgrade (RFC 9110 §7.8): such requests are served as plain requests by the server's
 * normal handler, on a response object built here, and the connection closes after the answer (its HTTP
 * parser is gone, so it cannot carry a next request). The body, if any, is read here by its content-length:
 * the parser that would have read it was detached at the upgrade, and with it Node's request timeout and
 * the socket's timeout events: both are re-armed here, so the body's deadlines are a plain request's
 * (http-guard.ts: silence inside the body, and the whole request).
 */
import { IncomingMessage, ServerResponse, type Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Config } from '../../config.js';

export function servePlain(
  server: Server,
  upgradeReq: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  config: Pick<Config, 'maxBodyBytes' | 'guard'>,
): void {
  const maxBodyBytes = config.maxBodyBytes;
  const sock = socket as Socket;
  // The upgrade's request object has ended (the parser let go of it): a fresh one carries the body.
  const req = new IncomingMessage(sock);
  req.method = upgradeReq.method;
  req.url = upgradeReq.url;
  req.headers = upgradeReq.headers;
  req.rawHeaders = upgradeReq.rawHeaders;
  req.httpVersion = upgradeReq.httpVersion;
  req.httpVersionMajor = upgradeReq.httpVersionMajor;
  req.httpVersionMinor = upgradeReq.httpVersionMinor;
  const chunked = /chunked/i.test(String(req.headers['transfer-encoding'] ?? ''));
  const length = Number(req.headers['content-length'] ?? 0);
  if (chunked || !Number.isSafeInteger(length) || length < 0) {
    // Rare enough (a chunked body with an Upgrade header) not to parse chunked framing by hand.
    sock.end('HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n');
    return;
  }
  const res = new ServerResponse(req);
  res.shouldKeepAlive = false;
  res.assignSocket(sock);
  // What Node's server does with a socket timeout, until the answer: the request hears it (the body guard
  // answers 408), or the connection goes.
  const onTimeout = () => {
    if (!req.emit('timeout', sock)) sock.destroy();
  };
  sock.on('timeout', onTimeout);
  // Node's requestTimeout, measured from here (the headers took at most their own timeout to arrive).
  const deadline = setTimeout(() => {
    if (req.complete) return;
    if (res.headersSent) return void sock.destroy();
    res.writeHead(408, { connection: 'close', 'content-length': 0 }).end();
  }, config.guard.clientRequestTimeoutMs);
  deadline.unref();
  res.on('finish', () => {
    res.detachSocket(sock);
    sock.end();
  });
  sock.once('close', () => {
    clearTimeout(deadline);
    sock.off('timeout', onTimeout);
    // As Node's parser would: a body that will never be complete ends its request (the handler lets go).
    if (!req.complete) {
      req.emit('aborted');
      req.destroy();
    }
  });
  // The request's body, as the normal path would have streamed it; past the limit it is not buffered here
  // (the handler answers 413 for the length it declared).
  const want = Math.min(length, maxBodyBytes + 1);
  const parts: Buffer[] = head.length ? [head.subarray(0, want)] : [];
  let got = parts[0]?.length ?? 0;
  const finish = () => {
    sock.off('data', onData);
    for (const p of parts) req.push(p);
    req.push(null);
    req.complete = true;
  };
  const onData = (b: Buffer) => {
    parts.push(b.subarray(0, want - got));
    got += Math.min(b.length, want - got);
    if (got >= want) finish();
  };
  server.emit('request', req, res);
  if (got >= want) finish();
  else {
    sock.on('data', onData);
    sock.resume();
  }
}
