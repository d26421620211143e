/** WebSocket clients for tests: open through keyrelay (or directly), collect messages, see refusals. */
import type { IncomingMessage } from 'node:http';
import { WebSocket, type ClientOptions } from 'ws';

export interface WsRefusal {
  status: number;
  headers: IncomingMessage['headers'];
  rawHeaders: string[];
  body: string;
}

export interface WsClient {
  ws: WebSocket;
  /** The 101 response's headers. */
  upgradeHeaders: IncomingMessage['headers'];
  messages: { data: Buffer; binary: boolean }[];
  /** Parsed text messages. */
  events(): Record<string, unknown>[];
  closed: Promise<{ code: number; reason: string; at: number }>;
  /** Resolves with the first event of this type (from the start of the connection). */
  waitFor(
    pred: (e: Record<string, unknown>) => boolean,
    timeoutMs?: number,
  ): Promise<Record<string, unknown>>;
}

/** `http://host:port` + path → ws URL. */
export function wsUrl(base: string, path: string): string {
  return base.replace(/^http/, 'ws') + path;
}

export function openWs(
  url: string,
  opts: { protocols?: string[]; headers?: Record<string, string>; rawPath?: string } & ClientOptions = {},
): Promise<WsClient | WsRefusal> {
  const { protocols, rawPath, ...rest } = opts;
  if (rawPath !== undefined) {
    // ws parses the URL (WHATWG rules re-encode ' and resolve %2e%2e); send the target exactly as given.
    (rest as { finishRequest?: unknown }).finishRequest = (req: { path: string; end(): void }) => {
      req.path = rawPath;
      req.end();
    };
  }
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, protocols ?? [], { perMessageDeflate: false, ...rest });
    const messages: { data: Buffer; binary: boolean }[] = [];
    let upgradeHeaders: IncomingMessage['headers'] = {};
    const waiters: (() => void)[] = [];
    ws.on('message', (data: Buffer, binary) => {
      messages.push({ data, binary });
      for (const w of waiters) w();
    });
    ws.on('upgrade', (res) => (upgradeHeaders = res.headers));
    const closed = new Promise<{ code: number; reason: string; at: number }>((r) =>
      ws.on('close', (code, reason) => r({ code, reason: reason.toString(), at: Date.now() })),
    );
    const events = () =>
      messages
        .filter((m) => !m.binary)
        .flatMap((m) => {
          try {
            return [JSON.parse(m.data.toString()) as Record<string, unknown>];
          } catch {
            return [];
          }
        });
    ws.once('unexpected-response', (_req, res) => {
      const parts: Buffer[] = [];
      res.on('data', (b: Buffer) => parts.push(b));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          rawHeaders: res.rawHeaders,
          body: Buffer.concat(parts).toString(),
        }),
      );
    });
    let opened = false;
    ws.on('error', (err) => {
      if (!opened) reject(err);
    });
    ws.once('open', () => (opened = true));
    ws.once('open', () =>
      resolve({
        ws,
        get upgradeHeaders() {
          return upgradeHeaders;
        },
        messages,
        events,
        closed,
        waitFor(pred, timeoutMs = 5000) {
          return new Promise((res, rej) => {
            const check = () => {
              const hit = events().find(pred);
              if (hit) {
                clearTimeout(t);
                res(hit);
                return true;
              }
              return false;
            };
            const t = setTimeout(() => rej(new Error('timed out waiting for a WebSocket event')), timeoutMs);
            if (!check()) waiters.push(() => void check());
          });
        },
      }),
    );
  });
}

export function isRefusal(x: WsClient | WsRefusal): x is WsRefusal {
  return 'status' in x;
}

export async function mustOpen(p: Promise<WsClient | WsRefusal>): Promise<WsClient> {
  const r = await p;
  if (isRefusal(r)) throw new Error(`upgrade refused: ${r.status} ${r.body}`);
  return r;
}

export async function mustRefuse(p: Promise<WsClient | WsRefusal>): Promise<WsRefusal> {
  const r = await p;
  if (!isRefusal(r)) {
    r.ws.terminate();
    throw new Error('upgrade was accepted');
  }
  return r;
}
