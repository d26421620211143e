/**
 * Pings and pongs are inside the relay's flow control. A caller floods pings and never reads: with an
 * upstream that answers each, the pongs wait for the caller; with an upstream that never reads, the pings
 * wait for upstream. Either way keyrelay (a child process, so its RSS is its own) pauses the side that
 * sends, or closes both past the buffer cap, and its memory stays bounded; and a closed socket leaves
 * nothing behind, so flood after flood does not add up.
 *
 * RSS right after a close says little about what was freed: V8 collects when it next needs to, and the C
 * allocator keeps freed pages for reuse. What does say it is the next flood: one that reuses the memory the
 * last one freed leaves RSS where the first left it, while a leak adds what it holds each time.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import {
  createUserWithKey,
  startServeProcess,
  stopServeProcess,
  type ServeProcess,
} from './helpers/process.js';

const MiB = 1024 * 1024;
/** Pings the caller sends in all: 125-byte payloads, ~80 MiB on the wire. */
const FLOOD_BYTES = 80 * MiB;
/** How long the caller floods at most (a busy machine sends less; what was sent is what counts). */
const FLOOD_MS = 20_000;
/**
 * keyrelay's RSS may grow this much over its idle size while flooded: the relay's buffer cap (32 MiB) and
 * the heap a busy process grows into (CI measured 62 MiB); unbounded, it grew by hundreds of MiB.
 */
const GROWTH_BOUND = 96 * MiB;
/**
 * What a repeated flood may add to RSS after close, from the second to the last: well under one buffer cap,
 * which a socket leaked with its buffers would add each time. Not from the first: the heap is still growing
 * into its working size through the first two (Node 24 measured +57 then +24 MiB, then -7).
 */
const REPEAT_BOUND = 16 * MiB;
/** keyrelay has paused the caller once our side's buffer stays full this long: the flood is over. */
const STALLED_MS = 2_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function rss(kr: ServeProcess, field: 'VmRSS' | 'VmHWM'): number {
  const status = readFileSync(`/proc/${kr.child.pid}/status`, 'latin1');
  return Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)![1]) * 1024;
}

type Upstream = 'answers' | 'never-reads';

let upstream: Server;
let mode: Upstream = 'answers';
let upstreamSockets: WebSocket[] = [];
let dataDir: string;
let kr: ServeProcess;
let key: string;

beforeAll(async () => {
  upstream = createServer();
  const wss = new WebSocketServer({ server: upstream });
  wss.on('connection', (ws, req) => {
    upstreamSockets.push(ws);
    ws.on('error', () => undefined);
    // An upstream that never reads: its socket is never read again after the handshake.
    if (mode === 'never-reads') req.socket.pause();
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  const upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  dataDir = mkdtempSync(join(tmpdir(), 'keyrelay-ws-ping-'));
  const env = { KEYRELAY_DATA_DIR: dataDir, KEYRELAY_OPENAI_UPSTREAM: upstreamUrl };
  ({ key } = await createUserWithKey('pings@example.com', env));
  kr = await startServeProcess(env);
}, 60_000);

afterAll(async () => {
  await stopServeProcess(kr);
  for (const ws of upstreamSockets) ws.terminate();
  await new Promise((r) => upstream.close(r));
  rmSync(dataDir, { recursive: true, force: true });
});

/** Opens a relayed socket, floods pings without ever reading, then closes; keyrelay's RSS around it. */
async function flood(): Promise<{ sent: number; grown: number; afterClose: number; cut: boolean }> {
  upstreamSockets = [];
  const base = rss(kr, 'VmRSS');
  const ws = new WebSocket(
    `${kr.url.replace('http', 'ws')}/api/proxy/openai/v1/realtime?model=gpt-realtime`,
    {
      headers: { 'proxy-api-key': key, authorization: 'Bearer sk-test' },
      autoPong: false,
    },
  );
  ws.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('unexpected-response', (_req, res) => reject(new Error(`refused ${res.statusCode}`)));
  });
  ws.pause(); // never reads again: pongs (and anything else) back up toward keyrelay
  let cut = false;
  ws.once('close', () => (cut = true));
  const payload = Buffer.alloc(125, 'p');
  let sent = 0;
  const started = Date.now();
  let peak = base;
  let stalledSince = 0;
  while (sent < FLOOD_BYTES && Date.now() - started < FLOOD_MS && !cut && ws.readyState === 1) {
    // Keep our own side's buffer small: the flood is what the kernel lets through to keyrelay.
    if (ws.bufferedAmount > MiB) {
      stalledSince ||= Date.now();
      if (Date.now() - stalledSince > STALLED_MS) break;
      await sleep(5);
      peak = Math.max(peak, rss(kr, 'VmRSS'));
      continue;
    }
    stalledSince = 0;
    for (let i = 0; i < 256; i++) ws.ping(payload);
    sent += 256 * (payload.length + 6);
    if (sent % (4 * MiB) < 256 * 131) {
      await sleep(0);
      peak = Math.max(peak, rss(kr, 'VmRSS'));
    }
  }
  await sleep(500);
  peak = Math.max(peak, rss(kr, 'VmRSS'));
  ws.terminate();
  for (const up of upstreamSockets) up.terminate();
  await sleep(3_000); // keyrelay's close grace, then what it frees is freed
  const afterClose = rss(kr, 'VmRSS');
  console.log(
    `ping flood (${mode}): ${(sent / MiB).toFixed(0)} MiB of pings sent, keyrelay RSS ${(base / MiB).toFixed(0)}` +
      ` → peak ${(peak / MiB).toFixed(0)} → ${(afterClose / MiB).toFixed(0)} MiB after close${cut ? ', caller cut' : ''}`,
  );
  return { sent, grown: peak - base, afterClose, cut };
}

/** Three floods in a row: each stays bounded, and the last leaves RSS about where the second left it. */
async function floods(): Promise<void> {
  const runs = [];
  for (let i = 0; i < 3; i++) {
    const run = await flood();
    expect(run.grown).toBeLessThan(GROWTH_BOUND);
    runs.push(run);
  }
  expect(runs[2]!.afterClose - runs[1]!.afterClose).toBeLessThan(REPEAT_BOUND);
}

describe('a caller that floods pings and never reads', () => {
  it('with an upstream that answers each: keyrelay stays bounded, and floods do not add up', async () => {
    mode = 'answers';
    await floods();
  }, 120_000);

  it('with an upstream that never reads: keyrelay stays bounded, and floods do not add up', async () => {
    mode = 'never-reads';
    await floods();
  }, 120_000);
});
