/**
 * A minimal fake OpenAI + Anthropic upstream for the benchmark, in its own process. Fast on purpose: it
 * must never be the bottleneck. Streams are `chunks` body writes (default 50), `chunk_ms` apart (0: one
 * event-loop turn apart), both read from the query string, which keyrelay forwards unchanged.
 * Prints `{"port":N}` on stdout once listening.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { startLoopDelayMetrics } from './loop-delay.js';

const CREATED = 1_700_000_000;
const TEXT = 'Hello from the bench upstream.';
const readMetrics = startLoopDelayMetrics();

interface Parsed {
  model: string;
  stream: boolean;
  includeUsage: boolean;
}

function parseBody(raw: string): Parsed {
  try {
    const b = JSON.parse(raw) as {
      model?: unknown;
      stream?: unknown;
      stream_options?: { include_usage?: unknown };
    };
    return {
      model: typeof b.model === 'string' ? b.model : 'unknown',
      stream: b.stream === true,
      includeUsage: b.stream_options?.include_usage === true,
    };
  } catch {
    return { model: 'unknown', stream: false, includeUsage: false };
  }
}

function sendJson(res: ServerResponse, body: string): void {
  res.writeHead(200, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
    'x-request-id': 'req_bench',
  });
  res.end(body);
}

function openaiCompletion(model: string): string {
  return (
    `{"id":"chatcmpl-bench","object":"chat.completion","created":${CREATED},"model":${JSON.stringify(model)},` +
    `"choices":[{"index":0,"message":{"role":"assistant","content":"${TEXT}","refusal":null},"logprobs":null,` +
    `"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}}`
  );
}

function anthropicMessage(model: string): string {
  return (
    `{"id":"msg_bench","type":"message","role":"assistant","model":${JSON.stringify(model)},` +
    `"content":[{"type":"text","text":"${TEXT}"}],"stop_reason":"end_turn","stop_sequence":null,` +
    `"usage":{"input_tokens":12,"output_tokens":7}}`
  );
}

/** The SSE text of write `i` of `n`: first and last writes carry the framing events. */
function openaiWrite(p: Parsed, i: number, n: number): string {
  const m = JSON.stringify(p.model);
  const usageNull = p.includeUsage ? ',"usage":null' : '';
  const chunk = (delta: string, finish: string) =>
    `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":${CREATED},"model":${m},` +
    `"choices":[{"index":0,"delta":${delta},"finish_reason":${finish}}]${usageNull}}\n\n`;
  let out = chunk(i === 0 ? '{"role":"assistant","content":"tok "}' : '{"content":"tok "}', 'null');
  if (i === n - 1) {
    out += chunk('{}', '"stop"');
    if (p.includeUsage) {
      out +=
        `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":${CREATED},"model":${m},` +
        `"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":${n},"total_tokens":${12 + n}}}\n\n`;
    }
    out += 'data: [DONE]\n\n';
  }
  return out;
}

function anthropicWrite(p: Parsed, i: number, n: number): string {
  let out = '';
  if (i === 0) {
    out +=
      `event: message_start\ndata: {"type":"message_start","message":{"id":"msg_bench","type":"message",` +
      `"role":"assistant","model":${JSON.stringify(p.model)},"content":[],"stop_reason":null,` +
      `"stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":1}}}\n\n` +
      `event: content_block_start\ndata: {"type":"content_block_start","index":0,` +
      `"content_block":{"type":"text","text":""}}\n\n`;
  }
  out +=
    `event: content_block_delta\ndata: {"type":"content_block_delta","index":0,` +
    `"delta":{"type":"text_delta","text":"tok "}}\n\n`;
  if (i === n - 1) {
    out +=
      `event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n` +
      `event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn",` +
      `"stop_sequence":null},"usage":{"output_tokens":${n}}}\n\n` +
      `event: message_stop\ndata: {"type":"message_stop"}\n\n`;
  }
  return out;
}

function sendStream(
  res: ServerResponse,
  write: (i: number, n: number) => string,
  n: number,
  gapMs: number,
): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  let i = 0;
  let timer: NodeJS.Timeout | NodeJS.Immediate | undefined;
  const next = (): void => {
    if (res.destroyed) return;
    res.write(write(i, n));
    i += 1;
    if (i >= n) {
      res.end();
      return;
    }
    timer = gapMs > 0 ? setTimeout(next, gapMs) : setImmediate(next);
  };
  res.on('close', () => {
    if (timer && i < n) {
      clearTimeout(timer as NodeJS.Timeout);
      clearImmediate(timer as NodeJS.Immediate);
    }
  });
  next();
}

function readQuery(url: string): { chunks: number; chunkMs: number } {
  const q = url.indexOf('?');
  if (q < 0) return { chunks: 50, chunkMs: 0 };
  const params = new URLSearchParams(url.slice(q + 1));
  return {
    chunks: Math.max(1, Number(params.get('chunks') ?? 50) || 50),
    chunkMs: Math.max(0, Number(params.get('chunk_ms') ?? 0) || 0),
  };
}

function handle(req: IncomingMessage, res: ServerResponse, raw: string): void {
  const url = req.url ?? '/';
  const path = url.split('?', 1)[0];
  if (req.method === 'GET' && path === '/metrics') {
    res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
    res.end(readMetrics());
    return;
  }
  const p = parseBody(raw);
  const { chunks, chunkMs } = readQuery(url);
  if (path === '/v1/chat/completions') {
    if (p.stream) sendStream(res, (i, n) => openaiWrite(p, i, n), chunks, chunkMs);
    else sendJson(res, openaiCompletion(p.model));
  } else if (path === '/v1/messages') {
    if (p.stream) sendStream(res, (i, n) => anthropicWrite(p, i, n), chunks, chunkMs);
    else sendJson(res, anthropicMessage(p.model));
  } else {
    res.writeHead(404, { 'content-type': 'application/json' });
    res.end('{"error":{"message":"not found","type":"invalid_request_error"}}');
  }
}

const server = createServer((req, res) => {
  let raw = '';
  req.setEncoding('utf8');
  req.on('data', (c: string) => (raw += c));
  req.on('end', () => handle(req, res, raw));
});
server.keepAliveTimeout = 120_000;
server.headersTimeout = 0;
server.requestTimeout = 0;
server.maxConnections = 20_000;
server.listen(0, '127.0.0.1', () => {
  const addr = server.address();
  if (addr && typeof addr === 'object') process.stdout.write(`${JSON.stringify({ port: addr.port })}\n`);
});
process.on('SIGTERM', () => process.exit(0));
