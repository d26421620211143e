import {
  createServer,
  type Server,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { FakeRequest, RenderedResponse } from './render.js';
import { parseScenario, type Scenario } from './scenario.js';
import { sendRendered, type SendOutcome } from './wire.js';

export interface RecordedResponse {
  status: number;
  headers: Record<string, string | string[]>;
  /** The exact body bytes written to the socket (after encoding), growing while the response is sent. */
  body: Buffer;
  /** Set once sending ended; undefined while in flight. */
  outcome?: SendOutcome;
}

export interface RecordedRequest {
  method: string;
  /** Path and query as received. */
  url: string;
  /** As node gives them, to check duplicates and exact values. */
  rawHeaders: string[];
  headers: IncomingHttpHeaders;
  body: Buffer;
  receivedAt: number;
  /** The client went away before the fake finished its response (not set by our own drop). */
  aborted: boolean;
  response?: RecordedResponse;
}

export interface FakeUpstream {
  /** http://127.0.0.1:PORT (no trailing slash). */
  url: string;
  port: number;
  requests: RecordedRequest[];
  /** When each server-side socket closed (Date.now()). */
  socketsClosed: { at: number }[];
  openSockets(): number;
  /** The fake's HTTP server (the WebSocket side attaches to its 'upgrade' event). */
  server: Server;
  /** Resolves once at least `count` requests have arrived (headers received); rejects after timeoutMs. */
  waitForRequests(count: number, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

export type RenderFn = (req: FakeRequest, scenario: Scenario) => RenderedResponse;

function collectBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve) => {
    const parts: Buffer[] = [];
    req.on('data', (b: Buffer) => parts.push(b));
    req.on('end', () => resolve(Buffer.concat(parts)));
    req.on('close', () => resolve(Buffer.concat(parts)));
  });
}

async function handle(
  req: IncomingMessage,
  res: ServerResponse,
  rec: RecordedRequest,
  render: RenderFn,
): Promise<void> {
  let droppedByUs = false;
  res.on('close', () => {
    if (!res.writableFinished && !droppedByUs) rec.aborted = true;
  });
  rec.body = await collectBody(req);
  if (res.destroyed) return;
  const scenario = parseScenario(req.headers);
  const path = rec.url;
  let rendered: RenderedResponse;
  if (scenario.redirect !== undefined) {
    rendered = { status: 307, headers: { location: scenario.redirect }, pieces: [], stream: false };
  } else if (req.method === 'HEAD' && path === '/') {
    rendered = { status: 200, headers: {}, pieces: [], stream: false };
  } else {
    rendered = render({ method: rec.method, path, headers: req.headers, body: rec.body }, scenario);
  }
  const response: RecordedResponse = {
    status: rendered.status,
    headers: rendered.headers,
    body: Buffer.alloc(0),
  };
  rec.response = response;
  response.outcome = await sendRendered(
    res,
    rendered,
    scenario,
    (bytes) => {
      response.body = Buffer.concat([response.body, bytes]);
    },
    () => {
      droppedByUs = true;
    },
  );
}

/** Starts a node:http server on 127.0.0.1, port 0, answering with `render` and recording everything. */
export async function startFakeUpstream(render: RenderFn): Promise<FakeUpstream> {
  const requests: RecordedRequest[] = [];
  const socketsClosed: { at: number }[] = [];
  const sockets = new Set<Socket>();
  const waiters: (() => void)[] = [];
  const server = createServer((req, res) => {
    const rec: RecordedRequest = {
      method: req.method ?? 'GET',
      url: req.url ?? '/',
      rawHeaders: [...req.rawHeaders],
      headers: req.headers,
      body: Buffer.alloc(0),
      receivedAt: Date.now(),
      aborted: false,
    };
    requests.push(rec);
    for (const w of waiters.splice(0)) w();
    handle(req, res, rec, render).catch(() => {
      // A fake must never take the test process down; an unexpected failure ends the connection.
      res.destroy();
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => {
      sockets.delete(socket);
      socketsClosed.push({ at: Date.now() });
    });
  });
  server.on('clientError', (_err, socket) => socket.destroy());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    socketsClosed,
    openSockets: () => sockets.size,
    server,
    async waitForRequests(count, timeoutMs = 5000) {
      const deadline = Date.now() + timeoutMs;
      while (requests.length < count) {
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`fake upstream: expected ${count} requests, got ${requests.length}`);
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, left);
          waiters.push(() => {
            clearTimeout(t);
            resolve();
          });
        });
      }
    },
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const s of sockets) s.destroy();
      await closed;
    },
  };
}
