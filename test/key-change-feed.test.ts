/**
 * Key changes reach a running instance through the database's key change feed, without Redis: a key revoked
 * by the CLI (another process) on the default SQLite setup, and a key revoked on another instance sharing
 * PostgreSQL, are refused within about a second although the key cache TTL is ten minutes.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from './console-harness.js';
import { startFakeOpenAI, type FakeUpstream } from './fakes/index.js';
import { callProxy, quantile, startInstance, waitFor, type Instance } from './helpers/cluster.js';
import { createTestDatabase, type TestDatabase } from './helpers/pg.js';
import { createUserWithKey, runCli, startServeProcess, type ServeProcess } from './helpers/process.js';

const BOUND_MS = 1_500;
// Long enough that only the change feed can explain a refusal within the bound.
const LONG_TTL_MS = 600_000;
const TRIALS = 20;

let openai: FakeUpstream;

beforeAll(async () => {
  openai = await startFakeOpenAI();
});
afterAll(async () => {
  await openai?.close();
});

/** Polls `base` with `key` until it is refused; the time from `since` to that first refusal. */
async function timeToRefusal(base: string, key: string, since: number): Promise<number> {
  return waitFor(
    `${base} to refuse the revoked key`,
    async () => {
      const r = await callProxy(base, key);
      if (r.status === 200) return undefined;
      expect(r.status, r.text).toBe(401);
      expect(r.text).toContain('proxy_key_revoked');
      return performance.now() - since;
    },
    10_000,
    10,
  );
}

const show = (xs: number[]) =>
  `p50 ${quantile(xs, 0.5).toFixed(0)} ms, max ${Math.max(...xs).toFixed(0)} ms over ${xs.length}`;

describe('one instance on SQLite, no Redis', () => {
  let dataDir: string;
  let server: ServeProcess;

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'keyrelay-feed-'));
    server = await startServeProcess(
      { KEYRELAY_DATA_DIR: dataDir, KEYRELAY_OPENAI_UPSTREAM: openai.url },
      { tuning: { keyCacheTtlMs: LONG_TTL_MS } },
    );
  }, 60_000);
  afterAll(async () => {
    server?.child.kill('SIGTERM');
    await server?.exited;
    rmSync(dataDir, { recursive: true, force: true });
  }, 60_000);

  it('refuses a key revoked by the CLI within 1.5 s', async () => {
    const env = { KEYRELAY_DATA_DIR: dataDir };
    const key = await createUserWithKey('feed@example.com', env);
    // Warm the cache: from here the server answers for this key without reading the database.
    expect((await callProxy(server.url, key.key)).status).toBe(200);
    const revoked = await runCli(['keys', 'revoke', key.id], env);
    const exited = performance.now();
    expect(revoked.code, revoked.stderr).toBe(0);
    const ms = await timeToRefusal(server.url, key.key, exited);
    console.log(`CLI revoke (process exit) → first 401 on the SQLite server: ${ms.toFixed(0)} ms`);
    expect(ms).toBeLessThan(BOUND_MS);
  }, 60_000);
});

describe('two instances on one PostgreSQL, no Redis', () => {
  let db: TestDatabase;
  let a: Instance;
  let b: Instance;
  let onA: Client;

  beforeAll(async () => {
    db = await createTestDatabase();
    const env = {
      KEYRELAY_DATABASE_URL: db.url,
      KEYRELAY_OPENAI_UPSTREAM: openai.url,
    };
    const tuning = { keyCacheTtlMs: LONG_TTL_MS };
    [a, b] = await Promise.all([startInstance(env, tuning), startInstance(env, tuning)]);
    onA = new Client(a.url);
    await onA.signup(`feed-${Date.now()}@example.com`);
  }, 120_000);
  afterAll(async () => {
    await Promise.allSettled([a?.stop(), b?.stop()]);
    await db?.drop();
  }, 120_000);

  it('refuses on B a key revoked on A’s console within 1.5 s', async () => {
    const latencies: number[] = [];
    for (let i = 0; i < TRIALS; i++) {
      const made = await onA.post('/keys', { name: `trial ${i}` });
      expect(made.status, made.text).toBe(201);
      const k = made.json as { key: { id: string; key: string } };
      expect((await callProxy(b.url, k.key.key)).status).toBe(200);
      // Each trial would otherwise start at the same phase of B's poll (just after its last refusal).
      await new Promise((r) => setTimeout(r, Math.random() * 500));
      const revoked = await onA.post(`/keys/${k.key.id}/revoke`, {});
      const answered = performance.now();
      expect(revoked.status, revoked.text).toBe(200);
      latencies.push(await timeToRefusal(b.url, k.key.key, answered));
    }
    console.log(`console revoke on A (answered) → first 401 on B without Redis: ${show(latencies)}`);
    expect(Math.max(...latencies)).toBeLessThan(BOUND_MS);
  }, 60_000);

  it('refuses on both instances a key revoked by the CLI within 1.5 s', async () => {
    const made = await onA.post('/keys', { name: 'cli' });
    const k = made.json as { key: { id: string; key: string } };
    for (const inst of [a, b]) expect((await callProxy(inst.url, k.key.key)).status).toBe(200);
    const revoked = await runCli(['keys', 'revoke', k.key.id], { KEYRELAY_DATABASE_URL: db.url });
    const exited = performance.now();
    expect(revoked.code, revoked.stderr).toBe(0);
    for (const inst of [a, b])
      expect(await timeToRefusal(inst.url, k.key.key, exited)).toBeLessThan(BOUND_MS);
  }, 60_000);
});
