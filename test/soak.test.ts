/**
 * Soak under hostile load: one `keyrelay serve` (the built CLI) under a 256-descriptor limit, for ~40 s, with slow
 * clients from another address (headers a line a second, login bodies a byte a second, reconnecting when
 * cut or refused), a key holder from that address opening WebSockets that flood pings and never read, and
 * pipelining requests behind answers that close the connection, a hostile upstream answering every call on
 * its route with a 1 GiB brotli bomb, and normal keyed traffic from 127.0.0.1 meanwhile. It must stay up, answer every legitimate request, keep RSS
 * under the stated bound, and log every proxied call. Loopback only; `npm run build` first.
 */
import Database from 'better-sqlite3';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import zlib from 'node:zlib';
import { Agent, request } from 'undici';
import { WebSocket } from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeOpenAI, type FakeUpstream } from './fakes/index.js';
import { createUserWithKey, startServeProcess } from './helpers/process.js';

const MiB = 1024 * 1024;
const SOAK_MS = 40_000;
/**
 * V8 13 (Node 24) lets a busy process's young generation grow to 128 MiB on this machine where V8 11 and 12
 * (Node 20, 22) stop at 32 MiB (measured: an allocation burst, then v8.getHeapSpaceStatistics()). That is
 * V8's choice, not keyrelay's buffering, so the bound carries it on top. Node 24's peaks also spread much
 * wider than the others' (360–442 MiB in five runs of one build, where Node 20 and 22 peaked at 233 and
 * 262), so the extra is 160 MiB: with 96, two of those five runs failed.
 */
const V8_YOUNG_EXTRA = Number(process.versions.v8.split('.')[0]) >= 13 ? 160 * MiB : 0;
/** keyrelay's RSS, at any moment of the soak (VmHWM). Idle it is ~90–110 MiB. */
const RSS_BOUND = 320 * MiB + V8_YOUNG_EXTRA;
const ATTACKER = '127.0.0.2';
/**
 * The ping flooders' own address. Behind ATTACKER the slow clients hold the per-address cap nearly all the
 * time, so a flooder sharing it was admitted only when a slot happened to be free, a few times a run and
 * sometimes never; flow control on an admitted socket is what they test.
 */
const FLOODER = '127.0.0.3';

let openai: FakeUpstream;
let bombServer: Server;
let bombUrl: string;
let dataDir: string;

beforeAll(async () => {
  openai = await startFakeOpenAI();
  const c = zlib.createBrotliCompress({ params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 5 } });
  const parts: Buffer[] = [];
  c.on('data', (d: Buffer) => parts.push(d));
  const ended = new Promise((r) => c.once('end', r));
  const fill = Buffer.alloc(MiB, 'a');
  c.write('{"id":"msg_x","type":"message","content":[{"type":"text","text":"');
  for (let i = 0; i < 1024; i++) await new Promise<void>((r) => c.write(fill, () => r()));
  c.end('"}]}');
  await ended;
  const bomb = Buffer.concat(parts);
  bombServer = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'br' });
      res.end(bomb);
    });
  });
  await new Promise<void>((r) => bombServer.listen(0, '127.0.0.1', r));
  bombUrl = `http://127.0.0.1:${(bombServer.address() as AddressInfo).port}`;
  dataDir = mkdtempSync(join(tmpdir(), 'keyrelay-soak-'));
}, 60_000);

afterAll(async () => {
  await openai.close();
  await new Promise((r) => bombServer.close(r));
  rmSync(dataDir, { recursive: true, force: true });
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One slow client, reconnecting whenever it is cut or refused, until `stop()`. */
function slowClient(
  port: number,
  kind: 'headers' | 'body',
  isRunning: () => boolean,
  stats: { cut: number },
) {
  return (async () => {
    while (isRunning()) {
      const socket: Socket = connect({ port, host: '127.0.0.1', localAddress: ATTACKER });
      socket.on('error', () => undefined);
      const closed = new Promise<void>((r) => socket.once('close', () => r()));
      let open = true;
      void closed.then(() => (open = false));
      socket.write(
        kind === 'headers'
          ? 'GET /healthz HTTP/1.1\r\nHost: x\r\n'
          : 'POST /api/console/login HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{',
      );
      while (open && isRunning()) {
        await Promise.race([sleep(1000), closed]);
        if (open) socket.write(kind === 'headers' ? 'x-slow: 1\r\n' : ' ');
      }
      if (!isRunning()) socket.destroy();
      else stats.cut++;
      await sleep(500);
    }
  })();
}

/** A key holder's WebSocket that floods pings and never reads, reopened whenever it is cut or refused. */
function pingFlooder(
  port: number,
  key: string,
  isRunning: () => boolean,
  stats: { opened: number; refused: number; cut: number },
) {
  return (async () => {
    const payload = Buffer.alloc(125, 'p'); // a control frame's largest
    while (isRunning()) {
      const ws = new WebSocket(`ws://127.0.0.1:${port}/api/proxy/openai/v1/realtime?model=gpt-realtime`, {
        headers: { 'proxy-api-key': key, authorization: 'Bearer sk-soak' },
        localAddress: FLOODER,
      });
      ws.on('error', () => undefined);
      const closed = new Promise<void>((r) => ws.once('close', () => r()));
      const opened = await new Promise<boolean>((r) => {
        ws.once('open', () => r(true));
        ws.once('unexpected-response', (_req, res) => (res.resume(), r(false)));
        ws.once('close', () => r(false));
      });
      if (!opened) {
        stats.refused++;
        ws.terminate();
        await sleep(250);
        continue;
      }
      stats.opened++;
      ws.pause();
      while (isRunning() && ws.readyState === WebSocket.OPEN) {
        if (ws.bufferedAmount < 1024 * 1024) for (let i = 0; i < 64; i++) ws.ping(payload);
        await Promise.race([sleep(20), closed]);
      }
      if (isRunning()) stats.cut++;
      ws.terminate();
      await sleep(250);
    }
  })();
}

/** The model a request hidden behind a closing answer names: it must never reach upstream. */
const PIPELINED_MODEL = 'pipelined-behind-close';

/** Requests pipelined behind answers that close the connection (an unknown route; HTTP/1.0 chunked). */
function pipeliner(port: number, key: string, isRunning: () => boolean, stats: { sent: number }) {
  const hidden = JSON.stringify({ model: PIPELINED_MODEL, messages: [{ role: 'user', content: 'x' }] });
  const behind =
    `POST /api/proxy/openai/v1/chat/completions HTTP/1.1\r\nHost: x\r\nproxy-api-key: ${key}\r\n` +
    `authorization: Bearer sk-soak\r\ncontent-type: application/json\r\ncontent-length: ${hidden.length}\r\n\r\n${hidden}`;
  const leads = [
    'GET /api/proxy/nope/v1/models HTTP/1.1\r\nHost: x\r\n\r\n',
    `POST /api/proxy/openai/v1/chat/completions HTTP/1.0\r\nHost: x\r\nproxy-api-key: ${key}\r\n` +
      'transfer-encoding: chunked\r\n\r\n0\r\n\r\n',
  ];
  return (async () => {
    while (isRunning()) {
      const socket = connect({ port, host: '127.0.0.1', localAddress: ATTACKER });
      socket.on('error', () => undefined);
      socket.resume();
      const closed = new Promise<void>((r) => socket.once('close', () => r()));
      socket.write(leads[stats.sent % leads.length]! + behind);
      stats.sent++;
      await Promise.race([closed, sleep(5000)]);
      socket.destroy();
      await sleep(100);
    }
  })();
}

function rss(pid: number): { now: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'latin1');
  const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)![1]) * 1024;
  return { now: kb('VmRSS'), peak: kb('VmHWM') };
}

describe('soak: slow clients, a decompression bomb and normal traffic under a low descriptor limit', () => {
  it('stays up, answers every legitimate request, stays under its RSS bound, loses no row', async () => {
    const env = {
      KEYRELAY_DATA_DIR: dataDir,
      KEYRELAY_OPENAI_UPSTREAM: openai.url,
      KEYRELAY_ANTHROPIC_UPSTREAM: bombUrl,
      // The caps are what 256 fds allow; slow clients past the per-address cap are cut at once, the others
      // at the header (20 s) and body-silence (15 s) timeouts.
      KEYRELAY_MAX_CONNECTIONS_PER_IP: '100',
    };
    const { key } = await createUserWithKey('soak@example.com', env);
    const kr = await startServeProcess(env, { built: true, wrap: ['prlimit', '--nofile=256:256', '--'] });
    const pid = kr.child.pid!;
    const port = Number(new URL(kr.url).port);
    let exited = false;
    void kr.exited.then(() => (exited = true));
    const baseline = rss(pid).now;

    let running = true;
    const isRunning = () => running;
    const slowStats = { cut: 0 };
    const attackers = [
      ...Array.from({ length: 150 }, () => slowClient(port, 'headers', isRunning, slowStats)),
      ...Array.from({ length: 50 }, () => slowClient(port, 'body', isRunning, slowStats)),
    ];
    const wsStats = { opened: 0, refused: 0, cut: 0 };
    const pipeStats = { sent: 0 };
    const keyHolders = [
      ...Array.from({ length: 8 }, () => pingFlooder(port, key, isRunning, wsStats)),
      ...Array.from({ length: 2 }, () => pipeliner(port, key, isRunning, pipeStats)),
    ];

    const dispatcher = new Agent({ connections: 4 });
    const legit = { ok: 0, failed: [] as string[], bombs: 0 };
    const call = async (provider: 'openai' | 'anthropic') => {
      try {
        const res = await request(
          `${kr.url}/api/proxy/${provider}/v1/${provider === 'openai' ? 'chat/completions' : 'messages'}`,
          {
            method: 'POST',
            dispatcher,
            headers: {
              'proxy-api-key': key,
              'content-type': 'application/json',
              'accept-encoding': 'br',
              'anthropic-version': '2023-06-01',
            },
            body: JSON.stringify({
              model: provider === 'openai' ? 'gpt-4o' : 'claude-sonnet-4-6',
              max_tokens: 16,
              messages: [{ role: 'user', content: 'soak' }],
            }),
          },
        );
        await res.body.dump();
        if (res.statusCode === 200) {
          if (provider === 'anthropic') legit.bombs++;
          else legit.ok++;
        } else legit.failed.push(`${provider} ${res.statusCode}`);
      } catch (err) {
        legit.failed.push(`${provider} ${(err as Error).message}`);
      }
    };
    const samples: number[] = [];
    const sampler = setInterval(() => samples.push(rss(pid).now), 500);
    const started = Date.now();
    const traffic = Array.from({ length: 4 }, async (_, i) => {
      while (Date.now() - started < SOAK_MS) {
        await call(i === 0 && legit.ok % 60 === 0 ? 'anthropic' : 'openai');
        await sleep(20);
      }
    });
    await Promise.all(traffic);
    running = false;
    clearInterval(sampler);
    await Promise.all([...attackers, ...keyHolders]);
    await dispatcher.close();

    if (exited) throw new Error(`keyrelay exited during the soak:\n${kr.output().slice(-6000)}`);
    const health = await request(`${kr.url}/healthz`, { reset: true });
    expect(health.statusCode).toBe(200);
    await health.body.dump();
    const mem = rss(pid);
    kr.child.kill('SIGTERM');
    await kr.exited;

    const db = new Database(join(dataDir, 'requests.db'), { readonly: true });
    const rows = db
      // The legitimate traffic's rows; the attacker's own (sockets, refusals) are its key's to see.
      .prepare(
        `SELECT provider, status, COUNT(*) AS n FROM requests WHERE client_ip NOT LIKE '%${ATTACKER}' AND client_ip NOT LIKE '%${FLOODER}'
         GROUP BY provider, status`,
      )
      .all();
    db.close();
    console.log(
      JSON.stringify({
        soakSeconds: SOAK_MS / 1000,
        legitimateOk: legit.ok,
        bombCalls: legit.bombs,
        failed: legit.failed.length,
        slowClientCuts: slowStats.cut,
        pingFlooders: wsStats,
        pipelined: pipeStats.sent,
        rssBaselineMiB: Math.round(baseline / MiB),
        rssMaxSampledMiB: Math.round(Math.max(...samples) / MiB),
        rssPeakMiB: Math.round(mem.peak / MiB),
        rows,
      }),
    );
    expect(legit.failed).toEqual([]);
    expect(legit.ok).toBeGreaterThan(200);
    expect(legit.bombs).toBeGreaterThan(3);
    // Every slow client was cut at least once (the cap refuses some outright, the timeouts cut the rest).
    expect(slowStats.cut).toBeGreaterThan(200);
    expect(mem.peak).toBeLessThan(RSS_BOUND);
    // Ping floods were admitted and then cut by flow control, never let grow memory (the bound above).
    expect(wsStats.opened).toBeGreaterThan(0);
    expect(wsStats.cut).toBeGreaterThan(0);
    expect(pipeStats.sent).toBeGreaterThan(20);
    const hidden = openai.requests.filter((r) => r.body.includes(PIPELINED_MODEL));
    expect(hidden).toEqual([]);
    expect(rows).toEqual([
      { provider: 'anthropic', status: 200, n: legit.bombs },
      { provider: 'openai', status: 200, n: legit.ok },
    ]);
  }, 120_000);
});
