/**
 * `keyrelay serve` gives memory back once traffic stops (src/cli/memory.ts): 30 s after a burst its old
 * generation is collected and its young generation shrunk (by V8 itself where it does so, else by one
 * collection of keyrelay's), and no collection of keyrelay's runs before that.
 * Read from the process's own /metrics and debug log, as an operator would.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeOpenAI, type FakeUpstream } from './fakes/index.js';
import { createUserWithKey, startServeProcess } from './helpers/process.js';

let openai: FakeUpstream;
let dataDir: string;

beforeAll(async () => {
  openai = await startFakeOpenAI();
  dataDir = mkdtempSync(join(tmpdir(), 'keyrelay-memory-'));
});
afterAll(async () => {
  await openai.close();
  rmSync(dataDir, { recursive: true, force: true });
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function heap(url: string): Promise<{ used: number; young: number; old: number; oldUsed: number }> {
  const text = await (await request(`${url}/metrics`)).body.text();
  const read = (re: RegExp) => Number(re.exec(text)?.[1] ?? NaN) / 1048576;
  return {
    used: read(/^nodejs_heap_size_used_bytes (\S+)/m),
    young: read(/^nodejs_heap_space_size_total_bytes\{space="new"\} (\S+)/m),
    old: read(/^nodejs_heap_space_size_total_bytes\{space="old"\} (\S+)/m),
    oldUsed: read(/^nodejs_heap_space_size_used_bytes\{space="old"\} (\S+)/m),
  };
}

interface Reclaim {
  time: number;
  reason: string;
}

describe('idle memory', () => {
  it('gives memory back after a burst and 30 s of quiet (one collection at most, never before)', async () => {
    const env = {
      KEYRELAY_DATA_DIR: dataDir,
      KEYRELAY_OPENAI_UPSTREAM: openai.url,
      KEYRELAY_LOG_LEVEL: 'debug',
    };
    const { key } = await createUserWithKey('mem@example.com', env);
    const kr = await startServeProcess(env);
    const reclaims = (): Reclaim[] =>
      kr
        .output()
        .split('\n')
        .filter((l) => l.includes('"idle memory reclaim"'))
        .map((l) => JSON.parse(l) as Reclaim);
    try {
      await sleep(1500);
      const before = await heap(kr.url);

      // A burst: bodies big enough to leave tens of MB of garbage behind.
      const dispatcher = new Agent({ connections: 32 });
      const body = JSON.stringify({
        model: 'gpt-4o',
        messages: [{ role: 'user', content: 'x'.repeat(20_000) }],
      });
      const burstStart = Date.now();
      let sent = 0;
      await Promise.all(
        Array.from({ length: 32 }, async () => {
          while (Date.now() - burstStart < 4000) {
            sent++;
            const res = await request(`${kr.url}/api/proxy/openai/v1/chat/completions`, {
              method: 'POST',
              dispatcher,
              headers: { 'proxy-api-key': key, 'content-type': 'application/json' },
              body,
            });
            expect(res.statusCode).toBe(200);
            await res.body.dump();
          }
        }),
      );
      const burstEnd = Date.now();
      await dispatcher.close();
      const after = await heap(kr.url);
      expect(sent).toBeGreaterThan(200);

      // Nothing for the first seconds of quiet (load that resumes soon must not pay for a collection); then,
      // 30 s in, at most one collection, and only where V8 has not given the memory back by itself (Node 22's
      // V8 often shrinks an idle young generation on its own; Node 20's and 24's keep it). The log is polled,
      // not /metrics, so nothing allocates meanwhile.
      await sleep(Math.max(0, burstEnd + 33_000 - Date.now()));
      const now = await heap(kr.url);
      const seen = JSON.stringify({ reclaims: reclaims(), before, after, now });
      expect(reclaims()[0]?.reason, seen).toBe('start');
      const later = reclaims().filter((r) => r.reason !== 'start');
      expect(later.length, seen).toBeLessThanOrEqual(1);
      if (later[0]) expect(later[0].time - burstEnd, seen).toBeGreaterThan(28_000);
      expect(after.young, seen).toBeGreaterThan(4);
      expect(now.young, seen).toBeLessThanOrEqual(4);
      expect(now.used, seen).toBeLessThan(before.used + 8);
    } finally {
      kr.child.kill('SIGTERM');
      await kr.exited;
    }
  }, 90_000);
});
