/**
 * What a key holder cannot get past on a WebSocket (docs/threat-model.md, docs/websockets.md): a
 * response.create of any size is checked or refused; bytes sent before the 101 are bounded; sockets are
 * counted per key and per instance (descriptors kept for plain requests); a request with an Upgrade header
 * that is not upgraded has a plain request's body deadlines.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setKeyLimits } from '../src/keys/actions.js';
import type { KeyLimits } from '../src/store/types.js';
import { startFakeOpenAI, type FakeUpstream } from './fakes/index.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';
import { createUserWithKey, startServeProcess } from './helpers/process.js';
import { rawHead } from './helpers/raw-http.js';
import { isRefusal, mustOpen, mustRefuse, openWs, wsUrl, type WsClient } from './helpers/ws.js';

const RESP = '/api/proxy/openai/v1/responses';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const HANDSHAKE = [
  'Host: keyrelay.test',
  'Connection: Upgrade',
  'Upgrade: websocket',
  'Sec-WebSocket-Version: 13',
  'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==',
];

/** What came back on a raw socket until it closed (or `timeoutMs`): the status line's code, or 0 for none. */
function statusOf(data: Buffer): number {
  const m = /^HTTP\/1\.1 (\d{3})/.exec(data.toString('latin1'));
  return m ? Number(m[1]) : 0;
}

describe('WebSockets: admission of each create, early bytes, body deadlines', () => {
  let h: Harness;
  let stall: Server;
  const stalled: Socket[] = [];
  beforeAll(async () => {
    // Shorter than the defaults (constants in src/http-guard.ts) so each cut happens within the test.
    h = await startHarness(
      {},
      {
        guard: { clientHeadersTimeoutMs: 2000, clientRequestTimeoutMs: 3000, clientBodyIdleTimeoutMs: 1000 },
      },
    );
    // An upstream whose handshake never completes: it accepts and reads, and never answers.
    stall = createServer((s) => {
      stalled.push(s);
      s.resume();
    });
    await new Promise<void>((r) => stall.listen(0, '127.0.0.1', r));
  });
  afterAll(async () => {
    for (const s of stalled) s.destroy();
    stall.close();
    await h.close();
  });

  async function userWith(limits: Partial<KeyLimits>) {
    const u = await h.newUser();
    await setKeyLimits({ store: h.kr.services.configStore, bus: h.kr.services.bus }, null, u.keyId, limits);
    return u;
  }

  const open = (key: string, path = RESP): Promise<WsClient> =>
    mustOpen(openWs(wsUrl(h.url, path), { headers: { 'proxy-api-key': key, authorization: 'Bearer sk-x' } }));

  it('checks a response.create over 4 MiB against the model list like any other', async () => {
    const u = await userWith({ allowed_models: ['gpt-4o-mini'] });
    const c = await open(u.key);
    const padding = 'x'.repeat(5 * 1024 * 1024);
    c.ws.send(JSON.stringify({ type: 'response.create', model: 'o1-pro', input: 'hi', padding }));
    const err = await c.waitFor((e) => e.type === 'error', 10_000);
    expect(err).toMatchObject({ error: { code: 'proxy_key_forbidden' } });
    const up = h.openai.ws.connections[h.openai.ws.connections.length - 1]!;
    expect(up.received).toHaveLength(0);
    c.ws.terminate();
  });

  it('refuses a message naming response.create that does not parse, instead of passing it unchecked', async () => {
    const u = await userWith({ allowed_models: ['gpt-4o-mini'] });
    const c = await open(u.key);
    c.ws.send('{"type":"response.create","model":"o1-pro",');
    const err = await c.waitFor((e) => e.type === 'error');
    expect(err).toMatchObject({ error: { code: 'proxy_bad_request' } });
    const up = h.openai.ws.connections[h.openai.ws.connections.length - 1]!;
    expect(up.received).toHaveLength(0);
    c.ws.terminate();
  });

  it('refuses a caller that sends more than a few KiB before its 101, and holds none of it', async () => {
    const port = (stall.address() as { port: number }).port;
    const other = await startHarness({ KEYRELAY_OPENAI_UPSTREAM: `http://127.0.0.1:${port}` });
    const u = await other.newUser();
    try {
      global.gc?.();
      const before = process.memoryUsage().rss;
      const s = connect(other.kr.port, '127.0.0.1');
      s.on('error', () => undefined);
      let got = Buffer.alloc(0);
      s.on('data', (b: Buffer) => (got = Buffer.concat([got, b])));
      const closed = new Promise<void>((r) => s.once('close', () => r()));
      s.write(rawHead(`GET ${RESP} HTTP/1.1`, [...HANDSHAKE, `proxy-api-key: ${u.key}`]));
      const chunk = Buffer.alloc(64 * 1024, 0x41);
      const TOTAL = 64 * 1024 * 1024;
      let sent = 0;
      const startedAt = Date.now();
      while (sent < TOTAL && !s.destroyed && got.length === 0) {
        sent += chunk.length;
        if (!s.write(chunk)) await Promise.race([new Promise((r) => s.once('drain', r)), sleep(200), closed]);
      }
      await Promise.race([closed, sleep(6_000)]);
      const grown = process.memoryUsage().rss - before;
      console.log(
        `early data: ${(sent / 1e6).toFixed(1)} MB written, answer ${statusOf(got)} after ${Date.now() - startedAt} ms, RSS +${(grown / 1e6).toFixed(1)} MB`,
      );
      // Answered long before the 10 s connect timeout would have given a 504.
      expect(statusOf(got)).toBe(400);
      expect(got.toString('latin1')).toContain('proxy_bad_request');
      expect(grown).toBeLessThan(32 * 1024 * 1024);
      s.destroy();
    } finally {
      await other.close();
    }
  }, 30_000);

  /** A keyed POST with `Upgrade: h2c` (served as a plain request) whose body is sent by `send`. */
  async function slowUpgradeBody(key: string, send: (s: Socket) => Promise<void>): Promise<number> {
    const s = connect(h.kr.port, '127.0.0.1');
    s.on('error', () => undefined);
    let got = Buffer.alloc(0);
    s.on('data', (b: Buffer) => (got = Buffer.concat([got, b])));
    const closed = new Promise<void>((r) => s.once('close', () => r()));
    s.write(
      rawHead('POST /api/proxy/openai/v1/chat/completions HTTP/1.1', [
        'Host: keyrelay.test',
        `proxy-api-key: ${key}`,
        'content-type: application/json',
        'content-length: 1000',
        'Connection: Upgrade, HTTP2-Settings',
        'Upgrade: h2c',
        'HTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA',
      ]),
    );
    void send(s);
    await Promise.race([closed, sleep(10_000)]);
    s.destroy();
    return statusOf(got);
  }

  it('answers 408 to a request with an Upgrade header whose body stops arriving', async () => {
    const u = await h.newUser();
    const status = await slowUpgradeBody(u.key, (s) => Promise.resolve(void s.write('{"model":')));
    expect(status).toBe(408);
  }, 15_000);

  it('answers 408 to a request with an Upgrade header whose body trickles past the request timeout', async () => {
    const u = await h.newUser();
    const status = await slowUpgradeBody(u.key, async (s) => {
      for (let i = 0; i < 40 && !s.destroyed; i++) {
        s.write(' ');
        await sleep(300);
      }
    });
    expect(status).toBe(408);
  }, 15_000);

  it("caps a key's open sockets at its max_concurrent", async () => {
    const u = await userWith({ max_concurrent: 2 });
    const a = await open(u.key);
    const b = await open(u.key);
    const refused = await mustRefuse(
      openWs(wsUrl(h.url, RESP), { headers: { 'proxy-api-key': u.key, authorization: 'Bearer sk-x' } }),
    );
    expect(refused.status).toBe(429);
    expect(refused.headers['x-keyrelay-error']).toBe('proxy_rate_limited');
    a.ws.close();
    await a.closed;
    let c: WsClient | null = null;
    for (let i = 0; i < 50 && !c; i++) {
      const r = await openWs(wsUrl(h.url, RESP), {
        headers: { 'proxy-api-key': u.key, authorization: 'Bearer sk-x' },
      });
      if (isRefusal(r)) await sleep(50);
      else c = r;
    }
    expect(c).not.toBeNull();
    b.ws.terminate();
    c?.ws.terminate();
  });
});

describe('WebSockets under a low descriptor limit', () => {
  let openai: FakeUpstream;
  let dataDir: string;
  beforeAll(async () => {
    openai = await startFakeOpenAI();
    dataDir = mkdtempSync(join(tmpdir(), 'keyrelay-ws-fds-'));
  });
  afterAll(async () => {
    await openai.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('refuses sockets past the instance cap and keeps descriptors for plain requests', async () => {
    const env = {
      KEYRELAY_DATA_DIR: dataDir,
      KEYRELAY_OPENAI_UPSTREAM: openai.url,
      KEYRELAY_MAX_CONNECTIONS: '100000',
    };
    const { key } = await createUserWithKey('wsfds@example.com', env);
    const kr = await startServeProcess(env, { wrap: ['prlimit', '--nofile=256:256', '--'] });
    const open: WsClient[] = [];
    const statuses = new Map<number, number>();
    try {
      for (let i = 0; i < 160; i++) {
        const r = await openWs(wsUrl(kr.url, RESP), {
          headers: { 'proxy-api-key': key, authorization: 'Bearer sk-x' },
        }).catch(() => null);
        if (r && !isRefusal(r)) open.push(r);
        const status = r === null ? -1 : isRefusal(r) ? r.status : 101;
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
      }
      console.log(`160 sockets under 256 descriptors: ${JSON.stringify([...statuses])}`);
      // (256 − 64 reserved) / 2 = 96 sockets; every other one refused as the instance's own limit.
      expect(open.length).toBe(96);
      expect(statuses.get(503)).toBe(160 - 96);
      const res = await request(`${kr.url}/api/proxy/openai/v1/chat/completions`, {
        method: 'POST',
        reset: true,
        headers: { 'proxy-api-key': key, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] }),
      });
      await res.body.dump();
      expect(res.statusCode).toBe(200);
    } finally {
      for (const c of open) c.ws.terminate();
      kr.child.kill('SIGTERM');
      await kr.exited;
    }
  }, 120_000);
});
