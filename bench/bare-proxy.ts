/**
 * Reference column: the least a Node proxy can do on the same path: node:http in, undici out, headers
 * filtered, body streamed both ways, no auth, no log. What keyrelay adds on top of this is its own cost.
 * Usage: bare-proxy.ts <openai-origin> <anthropic-origin>. Prints `{"port":N}` once listening.
 */
import { createServer, type IncomingHttpHeaders } from 'node:http';
import { pipeline } from 'node:stream/promises';
import { Pool } from 'undici';
import { startLoopDelayMetrics } from './loop-delay.js';

const [openaiOrigin, anthropicOrigin] = process.argv.slice(2);
if (!openaiOrigin || !anthropicOrigin)
  throw new Error('usage: bare-proxy.ts <openai-origin> <anthropic-origin>');
const pools = {
  openai: new Pool(openaiOrigin, { keepAliveTimeout: 60_000 }),
  anthropic: new Pool(anthropicOrigin, { keepAliveTimeout: 60_000 }),
};
const readMetrics = startLoopDelayMetrics();
const HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'host']);

function forwardHeaders(h: IncomingHttpHeaders): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(h)) {
    if (v === undefined || HOP.has(k) || k.startsWith('proxy-')) continue;
    out[k] = v;
  }
  return out;
}

const server = createServer((req, res) => {
  const url = req.url ?? '/';
  if (url === '/metrics') {
    res.end(readMetrics());
    return;
  }
  const m = /^\/api\/proxy\/(openai|anthropic)(\/.*)$/.exec(url);
  if (!m) {
    res.writeHead(404).end();
    return;
  }
  const pool = pools[m[1] as 'openai' | 'anthropic'];
  const ac = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) ac.abort();
  });
  pool
    .request({
      method: req.method as 'POST',
      path: m[2]!,
      headers: forwardHeaders(req.headers),
      body: req,
      signal: ac.signal,
    })
    .then(async (up) => {
      const headers: Record<string, string | string[]> = {};
      for (const [k, v] of Object.entries(up.headers)) if (v !== undefined && !HOP.has(k)) headers[k] = v;
      res.writeHead(up.statusCode, headers);
      await pipeline(up.body, res);
    })
    .catch(() => {
      if (!res.headersSent) res.writeHead(502).end();
      else res.destroy();
    });
});
server.keepAliveTimeout = 120_000;
server.requestTimeout = 0;
server.listen(0, '127.0.0.1', () => {
  const addr = server.address();
  if (addr && typeof addr === 'object') process.stdout.write(`${JSON.stringify({ port: addr.port })}\n`);
});
process.on('SIGTERM', () => process.exit(0));
