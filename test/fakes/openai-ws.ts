/**
 * The fake OpenAI upstream's WebSocket side: Realtime (`/v1/realtime`) and Responses WebSocket mode
 * (`/v1/responses`), on the fake's own HTTP server, recording everything it receives.
 *
 * A `response.create` may carry a `fake` member steering the answer: `usage` (the end event's usage),
 * `status` (`failed`, `incomplete`), `deltas` (text deltas, default 3), `audio` (audio deltas too),
 * `error` (answer with an error event instead), `hold` (start it, never finish). Control messages: `fake.close` {code, reason},
 * `fake.drop`, `fake.ping` {data}, `fake.flood` {count, size}, `fake.fragmented` {parts}. Any other
 * message, and every binary one, is echoed back as it came (binary stays binary).
 * Refusing the upgrade: the `x-fake-ws-refuse: <status>` request header; a slow answer: `x-fake-ws-delay-ms`.
 */
import { runOpenAIHostedTools } from './server-tools.js';
import { createHash } from 'node:crypto';
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocket, WebSocketServer } from 'ws';

export interface FakeWsConnection {
  url: string;
  rawHeaders: string[];
  headers: IncomingMessage['headers'];
  /** Subprotocols as offered, and the one accepted. */
  offered: string[];
  protocol: string;
  received: { data: Buffer; binary: boolean; at: number }[];
  /** Every message sent to the client, for hash comparisons. */
  sent: { data: Buffer; binary: boolean }[];
  pings: Buffer[];
  pongs: Buffer[];
  closed?: { code: number; reason: string; at: number };
  flooded: number;
  socket: WebSocket;
}

export interface FakeWs {
  connections: FakeWsConnection[];
  /** Upgrades refused by x-fake-ws-refuse. */
  refused: { url: string }[];
  /** Handshakes (delayed by x-fake-ws-delay-ms) whose client left before the answer. */
  abandoned: { url: string }[];
  waitForConnections(count: number, timeoutMs?: number): Promise<void>;
}

export const DEFAULT_REALTIME_USAGE = {
  total_tokens: 253,
  input_tokens: 132,
  output_tokens: 121,
  input_token_details: {
    text_tokens: 119,
    audio_tokens: 13,
    image_tokens: 0,
    cached_tokens: 64,
    cached_tokens_details: { text_tokens: 60, audio_tokens: 4, image_tokens: 0 },
  },
  output_token_details: { text_tokens: 30, audio_tokens: 91 },
};

export const DEFAULT_RESPONSES_USAGE = {
  input_tokens: 150,
  input_tokens_details: { cached_tokens: 100 },
  output_tokens: 40,
  output_tokens_details: { reasoning_tokens: 12 },
  total_tokens: 190,
};

/** 1.2 KB of deterministic "audio" (base64), as audio deltas carry. */
export const FAKE_AUDIO = createHash('sha512').update('audio').digest().toString('base64').repeat(14);

/** Per connection, so the same conversation yields the same ids (runs are compared by hash). */
let seq = 0;
const evt = () => `event_fake_${++seq}`;

export function attachFakeOpenAIWs(server: Server): FakeWs {
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: 64 * 1024 * 1024,
    handleProtocols: (offered) => (offered.has('realtime') ? 'realtime' : false),
  });
  // Upstream's own headers on the 101, as OpenAI sends a request id.
  wss.on('headers', (headers) => headers.push('x-request-id: req_fake_ws', 'set-cookie: upstream=1'));
  const fake: FakeWs = {
    connections: [],
    refused: [],
    abandoned: [],
    async waitForConnections(count, timeoutMs = 5000) {
      const deadline = Date.now() + timeoutMs;
      while (fake.connections.length < count) {
        if (Date.now() > deadline) throw new Error(`fake ws: expected ${count} connections`);
        await new Promise((r) => setTimeout(r, 5));
      }
    },
  };
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const refuse = req.headers['x-fake-ws-refuse'];
    if (typeof refuse === 'string') {
      fake.refused.push({ url: req.url ?? '' });
      const status = Number(refuse);
      const body = JSON.stringify({
        error: { message: `fake refusal ${status}`, type: 'invalid_request_error', code: 'fake_refused' },
      });
      socket.end(
        `HTTP/1.1 ${status} Fake Refused\r\ncontent-type: application/json\r\nx-request-id: req_fake_refused\r\n` +
          `set-cookie: upstream=1\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      );
      return;
    }
    const delay = Number(req.headers['x-fake-ws-delay-ms'] ?? 0);
    if (delay <= 0) return wss.handleUpgrade(req, socket, head, (ws) => onConnection(ws, req));
    // Reading while it waits, so that a client leaving is noticed.
    let gone = false;
    const early: Buffer[] = [];
    const onData = (b: Buffer) => early.push(b);
    socket.on('data', onData);
    socket.once('end', () => (gone = true));
    socket.once('close', () => (gone = true));
    setTimeout(() => {
      socket.off('data', onData);
      if (gone) return void fake.abandoned.push({ url: req.url ?? '' });
      wss.handleUpgrade(req, socket, Buffer.concat([head, ...early]), (ws) => onConnection(ws, req));
    }, delay);
  });

  function onConnection(ws: WebSocket, req: IncomingMessage): void {
    const url = req.url ?? '/';
    const conn: FakeWsConnection = {
      url,
      rawHeaders: [...req.rawHeaders],
      headers: req.headers,
      offered: (req.headers['sec-websocket-protocol'] ?? '')
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
      protocol: ws.protocol,
      received: [],
      sent: [],
      pings: [],
      pongs: [],
      flooded: 0,
      socket: ws,
    };
    fake.connections.push(conn);
    seq = 0;
    const realtime = url.startsWith('/v1/realtime');
    const model = new URL(url, 'http://x').searchParams.get('model') ?? 'gpt-realtime';
    const send = (data: string | Buffer, binary = false) => {
      const buf = Buffer.isBuffer(data) ? data : Buffer.from(data);
      conn.sent.push({ data: buf, binary });
      if (ws.readyState === WebSocket.OPEN) ws.send(buf, { binary });
    };
    const json = (o: object) => send(JSON.stringify(o));
    ws.on('ping', (d) => conn.pings.push(d));
    ws.on('pong', (d) => conn.pongs.push(d));
    ws.on('close', (code, reason) => (conn.closed = { code, reason: reason.toString(), at: Date.now() }));
    ws.on('error', () => {});
    if (realtime) {
      json({
        type: 'session.created',
        event_id: evt(),
        session: { id: 'sess_fake', object: 'realtime.session', type: 'realtime', model },
      });
    }
    ws.on('message', (data: Buffer, binary) => {
      conn.received.push({ data, binary, at: Date.now() });
      let msg: Record<string, unknown> | null = null;
      if (!binary) {
        try {
          msg = JSON.parse(data.toString()) as Record<string, unknown>;
        } catch {
          msg = null;
        }
      }
      const type = typeof msg?.type === 'string' ? msg.type : null;
      if (!msg || !type) return send(data, binary);
      switch (type) {
        case 'response.create':
          return realtime ? answerRealtime(msg, json, model) : answerResponses(msg, json);
        case 'session.update': {
          const s = (msg.session ?? {}) as { model?: string };
          return json({
            type: 'session.updated',
            event_id: evt(),
            session: { id: 'sess_fake', object: 'realtime.session', model: s.model ?? model },
          });
        }
        case 'fake.close':
          return ws.close(Number(msg.code ?? 1000), typeof msg.reason === 'string' ? msg.reason : '');
        case 'fake.drop':
          return ws.terminate();
        case 'fake.ping':
          return ws.ping(Buffer.from(typeof msg.data === 'string' ? msg.data : ''));
        case 'fake.fragmented': {
          const parts = (msg.parts as string[]) ?? [];
          parts.forEach((p, i) => ws.send(p, { fin: i === parts.length - 1 }));
          conn.sent.push({ data: Buffer.from(parts.join('')), binary: false });
          return;
        }
        case 'fake.flood':
          return flood(ws, conn, Number(msg.count ?? 1000), Number(msg.size ?? 65536));
        default:
          return send(data, binary);
      }
    });
  }
  return fake;
}

/** Sends as fast as the connection takes it (a well-behaved flooder: it waits when its own buffer fills). */
function flood(ws: WebSocket, conn: FakeWsConnection, count: number, size: number): void {
  const payload = Buffer.alloc(size, 0x61);
  const next = () => {
    while (conn.flooded < count && ws.readyState === WebSocket.OPEN) {
      if (ws.bufferedAmount > 1024 * 1024) return void setTimeout(next, 5);
      conn.flooded++;
      ws.send(payload, { binary: true });
    }
  };
  next();
}

type Send = (o: object) => void;
interface FakeSteer {
  usage?: object;
  status?: string;
  deltas?: number;
  audio?: boolean;
  error?: boolean;
  /** Start the response (created, deltas) and never finish it. */
  hold?: boolean;
  /** How often each hosted tool of the request's `tools` runs (default 1). */
  toolCalls?: number;
}

function answerRealtime(msg: Record<string, unknown>, json: Send, model: string): void {
  const f = (msg.fake ?? {}) as FakeSteer;
  if (f.error) {
    return json({
      type: 'error',
      event_id: evt(),
      error: {
        type: 'invalid_request_error',
        code: 'fake_invalid',
        message: 'fake error',
        param: null,
        event_id: msg.event_id ?? null,
      },
    });
  }
  const id = `resp_fake_${++seq}`;
  json({
    type: 'response.created',
    event_id: evt(),
    response: { id, object: 'realtime.response', status: 'in_progress' },
  });
  for (let i = 0; i < (f.deltas ?? 3); i++) {
    json({
      type: 'response.output_text.delta',
      event_id: evt(),
      response_id: id,
      item_id: 'item_1',
      output_index: 0,
      content_index: 0,
      delta: `word${i} `,
    });
    if (f.audio)
      json({
        type: 'response.output_audio.delta',
        event_id: evt(),
        response_id: id,
        item_id: 'item_1',
        output_index: 0,
        content_index: 0,
        delta: FAKE_AUDIO,
      });
  }
  if (f.hold) return;
  json({
    type: 'response.done',
    event_id: evt(),
    response: {
      id,
      object: 'realtime.response',
      status: f.status ?? 'completed',
      output: [
        {
          id: 'item_1',
          type: 'message',
          role: 'assistant',
          content: [{ type: 'output_audio', audio: FAKE_AUDIO, transcript: 'word0 word1 word2' }],
        },
      ],
      usage: f.usage ?? DEFAULT_REALTIME_USAGE,
      metadata: null,
      model_hint: model,
    },
  });
}

function answerResponses(msg: Record<string, unknown>, json: Send): void {
  const f = (msg.fake ?? {}) as FakeSteer;
  let n = 0;
  if (f.error) {
    return json({
      type: 'error',
      status: 400,
      error: { type: 'invalid_request_error', code: 'fake_invalid', message: 'fake error', param: null },
    });
  }
  const id = `resp_fake_${++seq}`;
  const model = typeof msg.model === 'string' ? msg.model : 'gpt-4o-mini';
  const base = { id, object: 'response', created_at: 1_700_000_000, model };
  const toolItems = runOpenAIHostedTools(msg.tools, f.toolCalls ?? 1, `ws${seq}`);
  json({
    type: 'response.created',
    sequence_number: n++,
    response: { ...base, status: 'in_progress', output: [] },
  });
  for (let i = 0; i < (f.deltas ?? 3); i++) {
    json({
      type: 'response.output_text.delta',
      sequence_number: n++,
      item_id: 'msg_1',
      output_index: 0,
      content_index: 0,
      delta: `word${i} `,
    });
  }
  const status = f.status ?? 'completed';
  const end =
    status === 'failed'
      ? 'response.failed'
      : status === 'incomplete'
        ? 'response.incomplete'
        : 'response.completed';
  json({
    type: end,
    sequence_number: n++,
    response: {
      ...base,
      status,
      output: [
        ...toolItems,
        {
          id: 'msg_1',
          type: 'message',
          role: 'assistant',
          content: [{ type: 'output_text', text: 'word0 word1 word2' }],
        },
      ],
      usage: f.usage ?? DEFAULT_RESPONSES_USAGE,
    },
  });
}
