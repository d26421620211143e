/**
 * At the descriptor limit (a flood of connections) keyrelay refuses new connections and
 * stays up; once they close it serves again. The built CLI, as an operator runs it, under a low
 * RLIMIT_NOFILE (`npm run build` first).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeOpenAI, type FakeUpstream } from './fakes/index.js';
import { createUserWithKey, startServeProcess } from './helpers/process.js';

let openai: FakeUpstream;
let dataDir: string;

beforeAll(async () => {
  openai = await startFakeOpenAI();
  dataDir = mkdtempSync(join(tmpdir(), 'keyrelay-fds-'));
});
afterAll(async () => {
  await openai.close();
  rmSync(dataDir, { recursive: true, force: true });
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Opens `n` connections that each start a request and never finish it. */
async function flood(port: number, n: number): Promise<Socket[]> {
  const sockets: Socket[] = [];
  for (let i = 0; i < n; i++) {
    const s = connect(port, '127.0.0.1');
    s.on('error', () => undefined);
    s.write('GET /healthz HTTP/1.1\r\n');
    sockets.push(s);
    if (i % 50 === 49) await sleep(20);
  }
  return sockets;
}

async function proxiedOk(url: string, key: string): Promise<number> {
  const res = await request(`${url}/api/proxy/openai/v1/chat/completions`, {
    method: 'POST',
    reset: true,
    headers: { 'proxy-api-key': key, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] }),
  });
  await res.body.dump();
  return res.statusCode;
}

describe('descriptor limit', () => {
  it('survives running out of descriptors and serves again once connections close', async () => {
    const env = {
      KEYRELAY_DATA_DIR: dataDir,
      KEYRELAY_OPENAI_UPSTREAM: openai.url,
      // No connection cap: the descriptors themselves run out, as with the cap set too high.
      KEYRELAY_MAX_CONNECTIONS: '100000',
    };
    const { key } = await createUserWithKey('fds@example.com', env);
    const kr = await startServeProcess(env, { built: true, wrap: ['prlimit', '--nofile=256:256', '--'] });
    const port = Number(new URL(kr.url).port);
    let exitedEarly = false;
    void kr.exited.then(() => (exitedEarly = true));
    try {
      expect(await proxiedOk(kr.url, key)).toBe(200);
      await sleep(2_000); // the idle-memory timer reads RSS only once the process is quiet
      const sockets = await flood(port, 400);
      // The idle-memory timer ticks every second; several ticks at the limit.
      await sleep(4_000);
      expect(exitedEarly).toBe(false);
      for (const s of sockets) s.destroy();
      await sleep(500);
      expect(exitedEarly).toBe(false);
      expect(await proxiedOk(kr.url, key)).toBe(200);
      const health = await request(`${kr.url}/healthz`, { reset: true });
      expect(health.statusCode).toBe(200);
      await health.body.dump();
    } finally {
      kr.child.kill('SIGTERM');
      await kr.exited;
    }
  }, 60_000);
});
