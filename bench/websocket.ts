/**
 * `npm run bench:ws` (also the last part of `npm run bench`): keyrelay's WebSocket relay beside a bare `ws`
 * relay (bench/ws-servers.ts), both on CPU 1 (taskset), in front of an echo upstream; this driver and the
 * upstream on CPU 0.
 *   - round trip: one socket, a Realtime-sized event sent and echoed back, 2,000 times per round, rounds
 *     interleaved across direct / bare / keyrelay; p50 and p99, and keyrelay's added p50 over the bare relay;
 *   - messages/s on one core: 32 sockets with 16 messages in flight each, 5 s; relayed messages per second
 *     (each round trip is two: caller → upstream and back);
 *   - 1,000 open sockets: each relay's RSS once they are open and idle.
 * keyrelay runs from dist/ (npm run build) with its request log on, as deployed.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { WebSocket } from 'ws';
import { createBenchKey, ROOT, startKeyrelay } from './keyrelay.js';
import { readRssMb, type Child } from './processes.js';
import { summarize } from './stats.js';

const log = (msg: string): void => void process.stderr.write(`[bench:ws] ${msg}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const quick = process.argv.includes('--quick');
const ROUNDS = quick ? 2 : 5;
const TRIPS = quick ? 500 : 2000;
const SOCKETS = 1000;

// A Realtime-sized client event (an audio append would be larger; this is the common small event).
const MESSAGE = JSON.stringify({
  type: 'conversation.item.create',
  event_id: 'evt_bench_0001',
  item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'x'.repeat(200) }] },
});

function startServer(args: string[], cpu: string): Promise<Child> {
  const proc = spawn(
    'taskset',
    ['-c', cpu, process.execPath, '--import', 'tsx', join(ROOT, 'bench/ws-servers.ts'), ...args],
    {
      cwd: ROOT,
    },
  );
  proc.stderr.pipe(process.stderr);
  return new Promise((resolve, reject) => {
    proc.once('exit', (code) => reject(new Error(`ws-servers ${args[0]} exited (${code})`)));
    proc.stdout.once('data', (b: Buffer) => {
      const { port } = JSON.parse(b.toString().split('\n')[0]!) as { port: number };
      proc.removeAllListeners('exit');
      resolve({
        proc,
        pid: proc.pid!,
        port,
        stop: () =>
          new Promise<void>((r) =>
            proc.exitCode !== null ? r() : (proc.once('exit', () => r()), proc.kill('SIGTERM')),
          ),
        exited: () => (proc.exitCode === null ? null : `exited ${proc.exitCode}`),
      });
    });
  });
}

interface Target {
  id: 'direct' | 'bare' | 'keyrelay';
  url: string;
  headers: Record<string, string>;
  pid: number | null;
}

function open(t: Target): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(t.url, { headers: t.headers, perMessageDeflate: false });
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
    ws.once('unexpected-response', (_q, res) =>
      reject(new Error(`${t.id}: upgrade refused ${res.statusCode}`)),
    );
  });
}

async function roundTrips(t: Target, n: number): Promise<number[]> {
  const ws = await open(t);
  const out: number[] = [];
  let started = 0;
  await new Promise<void>((resolve) => {
    ws.on('message', () => {
      out.push(performance.now() - started);
      if (out.length === n) return resolve();
      started = performance.now();
      ws.send(MESSAGE);
    });
    started = performance.now();
    ws.send(MESSAGE);
  });
  ws.close();
  return out;
}

async function throughput(t: Target, sockets: number, window: number, ms: number): Promise<number> {
  const all = await Promise.all(Array.from({ length: sockets }, () => open(t)));
  let trips = 0;
  let running = true;
  for (const ws of all) {
    ws.on('message', () => {
      trips++;
      if (running) ws.send(MESSAGE);
    });
    for (let i = 0; i < window; i++) ws.send(MESSAGE);
  }
  await sleep(1000); // warm
  const t0 = trips;
  const start = performance.now();
  await sleep(ms);
  const rate = ((trips - t0) * 1000) / (performance.now() - start);
  running = false;
  await sleep(200);
  for (const ws of all) ws.terminate();
  return rate * 2; // two relayed messages per round trip
}

async function openMany(t: Target, n: number): Promise<{ before: number; after: number }> {
  const before = readRssMb(t.pid!);
  const all: WebSocket[] = [];
  for (let i = 0; i < n; i += 50)
    all.push(...(await Promise.all(Array.from({ length: Math.min(50, n - i) }, () => open(t)))));
  await sleep(2000);
  const after = readRssMb(t.pid!);
  for (const ws of all) ws.terminate();
  await sleep(1000);
  return { before, after };
}

// This driver on CPU 0 with the upstream; the relays on CPU 1.
spawn('taskset', ['-p', '-c', '0', String(process.pid)]).on('error', () => undefined);
const dataDir = mkdtempSync(join(tmpdir(), 'keyrelay-bench-ws-'));
const echo = await startServer(['echo'], '0');
const upstream = `http://127.0.0.1:${echo.port}`;
const bare = await startServer(['bare', upstream], '1');
const key = await createBenchKey(dataDir);
const kr = await startKeyrelay({
  dataDir,
  upstream,
  requestLog: true,
  pin: '1',
  env: { KEYRELAY_LOG_LEVEL: 'warn' },
});
const PATH = '/v1/realtime?model=gpt-realtime';
const targets: Target[] = [
  { id: 'direct', url: `ws://127.0.0.1:${echo.port}${PATH}`, headers: {}, pid: echo.pid },
  { id: 'bare', url: `ws://127.0.0.1:${bare.port}${PATH}`, headers: {}, pid: bare.pid },
  {
    id: 'keyrelay',
    url: `ws://127.0.0.1:${kr.port}/api/proxy/openai${PATH}`,
    headers: { 'proxy-api-key': key, authorization: 'Bearer sk-bench' },
    pid: kr.pid,
  },
];

try {
  log(`round trips: ${ROUNDS} rounds × ${TRIPS}, interleaved (warm-up first)`);
  for (const t of targets) await roundTrips(t, 500);
  const samples: Record<string, number[]> = { direct: [], bare: [], keyrelay: [] };
  for (let r = 0; r < ROUNDS; r++)
    for (const t of targets) samples[t.id]!.push(...(await roundTrips(t, TRIPS)));
  const rtt = Object.fromEntries(Object.entries(samples).map(([id, s]) => [id, summarize(s)]));

  log('messages/s on one core: 32 sockets × 16 in flight, 5 s each');
  const rate: Record<string, number> = {};
  for (const t of targets.slice(1)) rate[t.id] = await throughput(t, 32, 16, quick ? 2000 : 5000);

  log(`${SOCKETS} open sockets`);
  const mem: Record<string, { before: number; after: number }> = {};
  for (const t of targets.slice(1)) mem[t.id] = await openMany(t, SOCKETS);

  const fmt = (x: number, d = 3) => x.toFixed(d);
  const lines = [
    '',
    '| WebSocket                               | direct | bare ws relay | keyrelay |',
    '| --------------------------------------- | -----: | ------------: | -------: |',
    `| round trip p50 (ms)                     | ${fmt(rtt.direct!.p50)} | ${fmt(rtt.bare!.p50)} | ${fmt(rtt.keyrelay!.p50)} |`,
    `| round trip p99 (ms)                     | ${fmt(rtt.direct!.p99)} | ${fmt(rtt.bare!.p99)} | ${fmt(rtt.keyrelay!.p99)} |`,
    `| messages/s relayed, one core            | — | ${fmt(rate.bare!, 0)} | ${fmt(rate.keyrelay!, 0)} |`,
    `| RSS idle → ${SOCKETS} open sockets (MB)      | — | ${fmt(mem.bare!.before, 0)} → ${fmt(mem.bare!.after, 0)} | ${fmt(mem.keyrelay!.before, 0)} → ${fmt(mem.keyrelay!.after, 0)} |`,
    '',
    `keyrelay adds ${fmt((rtt.keyrelay!.p50 - rtt.bare!.p50) * 1000, 0)} µs per round trip at p50 over the bare relay (target ≤ 300 µs);` +
      ` ${fmt(mem.keyrelay!.after, 0)} MB with ${SOCKETS} sockets open (target ≤ 150 MB).`,
  ];
  process.stdout.write(lines.join('\n') + '\n');
  const dir = join(ROOT, 'bench/results');
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, `ws-${new Date().toISOString().replace(/[:.]/g, '-')}.json`),
    JSON.stringify({ rtt, rate, mem, rounds: ROUNDS, trips: TRIPS, sockets: SOCKETS }, null, 2),
  );
} finally {
  await Promise.allSettled([kr.stop(), bare.stop(), echo.stop()]);
  rmSync(dataDir, { recursive: true, force: true });
}
