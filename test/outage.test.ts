/**
 * Outages of PostgreSQL and Redis, played by a TCP fault proxy between keyrelay and the real servers (which
 * are never stopped). With PostgreSQL away, proxied calls with verified keys keep working and their log rows
 * wait in the queue, all written once it is back. With Redis away, revocation falls back to the cache TTL,
 * and after Redis returns the caches are flushed so a revocation made meanwhile takes effect at once.
 */
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Client } from './console-harness.js';
import { startFakeAnthropic, startFakeOpenAI, type FakeUpstream } from './fakes/index.js';
import { callProxy, readMetric, startInstance, waitFor, type Instance } from './helpers/cluster.js';
import { startFaultProxy, type FaultProxy } from './helpers/fault-proxy.js';
import { createTestDatabase, type TestDatabase } from './helpers/pg.js';
import { runCli } from './helpers/process.js';

let db: TestDatabase;
let openai: FakeUpstream;
let anthropic: FakeUpstream;
const running: Instance[] = [];
const proxies: FaultProxy[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
  openai = await startFakeOpenAI();
  anthropic = await startFakeAnthropic();
}, 60_000);

// Each test's instances and relays go at its end: idle keyrelay processes add up on a small machine.
afterEach(async () => {
  for (const p of proxies) p.restore();
  await Promise.allSettled(running.splice(0).map((i) => i.stop()));
  await Promise.allSettled(proxies.splice(0).map((p) => p.close()));
}, 120_000);

afterAll(async () => {
  await openai?.close();
  await anthropic?.close();
  await db?.drop();
}, 60_000);

async function start(env: Record<string, string>, keyCacheTtlMs = 60_000): Promise<Instance> {
  const inst = await startInstance(
    { KEYRELAY_OPENAI_UPSTREAM: openai.url, KEYRELAY_ANTHROPIC_UPSTREAM: anthropic.url, ...env },
    { keyCacheTtlMs },
  );
  running.push(inst);
  return inst;
}

async function faultProxyTo(port: number): Promise<FaultProxy> {
  const p = await startFaultProxy({ host: '127.0.0.1', port });
  proxies.push(p);
  return p;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * `keyrelay serve` with `env` (a store away), expected to exit 1 within 60 s without listening; its stderr.
 * A supervisor (compose's restart policy, Kubernetes) restarts a process that exits, not one that hangs.
 */
async function failedStart(env: Record<string, string>): Promise<string> {
  const started = performance.now();
  const result = await runCli(
    ['serve'],
    {
      KEYRELAY_PORT: '0',
      KEYRELAY_OPENAI_UPSTREAM: openai.url,
      KEYRELAY_ANTHROPIC_UPSTREAM: anthropic.url,
      ...env,
    },
    undefined,
    60_000,
  );
  expect(result.code, `keyrelay serve still running after 60 s:\n${result.stderr}`).not.toBeNull();
  console.log(`start exited ${result.code} after ${(performance.now() - started).toFixed(0)} ms`);
  expect(result.code).toBe(1);
  expect(result.stdout).not.toMatch(/keyrelay listening/);
  return result.stderr;
}

/** One number about a key, read straight from PostgreSQL (not through keyrelay). */
async function readNumber(sql: string, keyId: string): Promise<number> {
  const client = new pg.Client({ connectionString: db.url, connectionTimeoutMillis: 5_000 });
  await client.connect();
  try {
    const { rows } = await client.query<{ n: string }>(sql, [keyId]);
    return Number(rows[0]!.n);
  } finally {
    await client.end();
  }
}

const countRows = (keyId: string) =>
  readNumber('SELECT count(*) AS n FROM requests WHERE key_id = $1', keyId);

/** A key's hourly spend (the request log off keeps it instead of rows), in nanodollars. */
const spentNanos = (keyId: string) =>
  readNumber('SELECT COALESCE(SUM(cost_nanos), 0)::text AS n FROM key_spend WHERE key_id = $1', keyId);

async function createKeyOn(client: Client, name: string): Promise<{ id: string; key: string }> {
  const r = await client.post('/keys', { name });
  expect(r.status, r.text).toBe(201);
  return { id: r.json.key.id as string, key: r.json.key.key as string };
}

/** Back-to-back proxied calls from a few workers until stopped; counts what the client saw. */
function startLoad(base: string, key: string, workers = 4) {
  let stopped = false;
  let answered = 0;
  const failures: string[] = [];
  const worker = async () => {
    while (!stopped) {
      try {
        const r = await callProxy(base, key);
        answered++;
        if (r.status !== 200) failures.push(`${r.status} ${r.text}`);
      } catch (err) {
        failures.push(String(err));
      }
    }
  };
  const all = Promise.all(Array.from({ length: workers }, worker));
  return {
    answered: () => answered,
    async stop(): Promise<{ answered: number; failures: string[] }> {
      stopped = true;
      await all;
      return { answered, failures };
    },
  };
}

/** One instance whose PostgreSQL connections go through a fault proxy, with one verified (cached) key. */
async function startBehindPgProxy(): Promise<{
  kr: Instance;
  pgProxy: FaultProxy;
  onKr: Client;
  key: { id: string; key: string };
}> {
  const pgProxy = await faultProxyTo(5432);
  const kr = await start({
    KEYRELAY_DATABASE_URL: db.url.replace('127.0.0.1:5432', pgProxy.host),
  });
  const onKr = new Client(kr.url);
  await onKr.signup(`pg-outage-${Date.now()}-${Math.random().toString(36).slice(2)}@example.com`);
  const key = await createKeyOn(onKr, 'load');
  expect((await callProxy(kr.url, key.key)).status).toBe(200);
  return { kr, pgProxy, onKr, key };
}

/** Every answered call has its row, once: the queue retries with a backoff of up to 5 s. */
async function expectAllRows(kr: Instance, keyId: string, expected: number): Promise<void> {
  const seen = await waitFor(
    `${expected} rows in PostgreSQL`,
    async () => {
      const n = await countRows(keyId);
      return n >= expected ? n : undefined;
    },
    60_000,
    500,
  );
  expect(seen).toBe(expected);
  await waitFor('keyrelay_store_up{store="log"} back to 1', async () =>
    (await readMetric(kr.url, 'keyrelay_store_up{store="log"}')) === 1 ? true : undefined,
  );
  expect(await readMetric(kr.url, 'keyrelay_log_queue_depth')).toBe(0);
  for (const reason of ['queue_full', 'rejected']) {
    expect(await readMetric(kr.url, `keyrelay_log_rows_dropped_total{reason="${reason}"}`)).toBeNull();
  }
}

describe('PostgreSQL outage under load', () => {
  it('keeps serving verified keys, queues the log rows and writes every one after PostgreSQL returns', async () => {
    const { kr, pgProxy, key } = await startBehindPgProxy();
    const load = startLoad(kr.url, key.key);

    await sleep(1_000);
    pgProxy.cut('refuse');
    const cutAt = Date.now();
    const atCut = load.answered();
    let sawStoreDown = false;
    let maxDepth = 0;
    while (Date.now() - cutAt < 3_000) {
      if ((await readMetric(kr.url, 'keyrelay_store_up{store="log"}')) === 0) sawStoreDown = true;
      maxDepth = Math.max(maxDepth, (await readMetric(kr.url, 'keyrelay_log_queue_depth')) ?? 0);
      await sleep(200);
    }
    const duringCut = load.answered() - atCut;
    pgProxy.restore();
    await sleep(1_000);
    const { answered, failures } = await load.stop();

    console.log(
      `PostgreSQL refused for 3 s under load: ${answered} calls answered (${duringCut} during the cut), ` +
        `${failures.length} failed, queue depth peaked at ${maxDepth}`,
    );
    expect(failures).toEqual([]);
    expect(duringCut).toBeGreaterThan(0);
    expect(sawStoreDown).toBe(true);
    expect(maxDepth).toBeGreaterThan(0);
    expect(kr.alive()).toBe(true);
    // + 1: the call that verified the key before the load.
    await expectAllRows(kr, key.id, answered + 1);
  }, 120_000);

  it('keeps serving verified keys through a partition, answers an unverified key with a prompt 503, loses no row', async () => {
    const { kr, pgProxy, onKr, key } = await startBehindPgProxy();
    const cold = await createKeyOn(onKr, 'never verified');
    const load = startLoad(kr.url, key.key);

    await sleep(1_000);
    pgProxy.cut('blackhole');
    const atCut = load.answered();
    const t = performance.now();
    const refused = await callProxy(kr.url, cold.key);
    const refusedMs = performance.now() - t;
    let maxDepth = 0;
    while (performance.now() - t < 8_000) {
      maxDepth = Math.max(maxDepth, (await readMetric(kr.url, 'keyrelay_log_queue_depth')) ?? 0);
      await sleep(200);
    }
    const duringCut = load.answered() - atCut;
    pgProxy.restore();
    await sleep(1_000);
    const { answered, failures } = await load.stop();

    console.log(
      `PostgreSQL silent for 8 s under load: ${answered} calls answered (${duringCut} during the partition), ` +
        `${failures.length} failed, queue depth peaked at ${maxDepth}; ` +
        `an unverified key got ${refused.status} after ${refusedMs.toFixed(0)} ms`,
    );
    expect(failures).toEqual([]);
    expect(duringCut).toBeGreaterThan(0);
    expect(maxDepth).toBeGreaterThan(0);
    expect(refused.status, refused.text).toBe(503);
    expect(refused.text).toContain('proxy_unavailable');
    expect(refusedMs).toBeLessThan(7_500);
    expect(kr.alive()).toBe(true);
    await expectAllRows(kr, key.id, answered + 1);
  }, 120_000);
});

/** Two instances on the shared database whose Redis connections go through a fault proxy. */
async function startPairBehind(
  redis: FaultProxy,
  ttlMs: number,
): Promise<{ a: Instance; b: Instance; onA: Client; email: string }> {
  const env = {
    KEYRELAY_DATABASE_URL: db.url,
    KEYRELAY_REDIS_URL: `redis://${redis.host}`,
  };
  const [a, b] = await Promise.all([start(env, ttlMs), start(env, ttlMs)]);
  const onA = new Client(a.url);
  const email = `redis-outage-${Date.now()}-${Math.random().toString(36).slice(2)}@example.com`;
  await onA.signup(email);
  return { a, b, onA, email };
}

const redisUp = (inst: Instance) => readMetric(inst.url, 'keyrelay_redis_up');

async function waitRedisUp(inst: Instance, value: 0 | 1): Promise<void> {
  await waitFor(`keyrelay_redis_up ${value} on ${inst.url}`, async () =>
    (await redisUp(inst)) === value ? true : undefined,
  );
}

describe('PostgreSQL outage with the request log off', () => {
  it('keeps what keys spent while PostgreSQL was away and writes it once it is back', async () => {
    const pgProxy = await faultProxyTo(5432);
    const kr = await start({
      KEYRELAY_DATABASE_URL: db.url.replace('127.0.0.1:5432', pgProxy.host),
      KEYRELAY_REQUEST_LOG: 'false',
    });
    const onKr = new Client(kr.url);
    await onKr.signup(`spend-outage-${Date.now()}@example.com`);
    const key = await createKeyOn(onKr, 'spend');
    expect((await callProxy(kr.url, key.key)).status).toBe(200);
    const oneCall = await waitFor("the first call's spend in key_spend", async () => {
      const n = await spentNanos(key.id);
      return n > 0 ? n : undefined;
    });

    pgProxy.cut('refuse');
    for (let i = 0; i < 5; i++) expect((await callProxy(kr.url, key.key)).status).toBe(200);
    await sleep(1_000); // a few flushes fail meanwhile
    expect(await spentNanos(key.id)).toBe(oneCall);
    pgProxy.restore();

    // Each call bills the same: every one of the six is there, exactly, once.
    const all = await waitFor(
      'six calls in key_spend',
      async () => {
        const n = await spentNanos(key.id);
        return n >= 6 * oneCall ? n : undefined;
      },
      30_000,
      200,
    );
    expect(all).toBe(6 * oneCall);
    expect(await countRows(key.id)).toBe(0);
  }, 120_000);
});

describe('PostgreSQL away at start', () => {
  // The error names the store and its variable, never the URL (it may hold a password).
  it.each(['refuse', 'blackhole'] as const)(
    'a start with PostgreSQL away (%s) exits 1 naming PostgreSQL, instead of staying up never listening',
    async (mode) => {
      const pgProxy = await faultProxyTo(5432);
      pgProxy.cut(mode);
      const url = db.url.replace('127.0.0.1:5432', pgProxy.host);
      const stderr = await failedStart({ KEYRELAY_DATABASE_URL: url });
      expect(stderr).toMatch(/^keyrelay: PostgreSQL \(KEYRELAY_DATABASE_URL\): /m);
      expect(stderr).not.toContain(url);
    },
    90_000,
  );
});

describe('Redis outage', () => {
  const TTL_MS = 2_000;

  it.each(['refuse', 'blackhole'] as const)(
    'a start with Redis away (%s) exits 1 naming Redis, instead of staying up never listening',
    async (mode) => {
      const redis = await faultProxyTo(6379);
      redis.cut(mode);
      const stderr = await failedStart({
        KEYRELAY_DATABASE_URL: db.url,
        KEYRELAY_REDIS_URL: `redis://127.0.0.1:${redis.port}`,
      });
      expect(stderr).toMatch(/^keyrelay: Redis \(KEYRELAY_REDIS_URL\)/m);
    },
    90_000,
  );

  it('falls back to the key cache TTL for revocation, reports redis_up 0 and keeps running', async () => {
    const redis = await faultProxyTo(6379);
    const { a, b, onA, email } = await startPairBehind(redis, TTL_MS);
    const k = await createKeyOn(onA, 'ttl backstop');
    for (const inst of [a, b]) await waitRedisUp(inst, 1);

    redis.cut('refuse');
    for (const inst of [a, b]) await waitRedisUp(inst, 0);

    // Warm B's cache now, so the entry is as fresh as it can be when the revocation lands.
    expect((await callProxy(b.url, k.key)).status).toBe(200);
    const revokedAt = performance.now();
    const revoked = await onA.post(`/keys/${k.id}/revoke`, {});
    expect(revoked.status, revoked.text).toBe(200);
    expect((await callProxy(a.url, k.key)).status).toBe(401);
    const elapsed = await waitFor(
      'B to refuse the revoked key through its cache TTL',
      async () =>
        (await callProxy(b.url, k.key)).status === 401 ? performance.now() - revokedAt : undefined,
      TTL_MS + 10_000,
      20,
    );
    console.log(
      `Redis down: revocation on A refused by B after ${elapsed.toFixed(0)} ms (cache TTL ${TTL_MS} ms)`,
    );
    expect(elapsed).toBeLessThanOrEqual(TTL_MS + 1_500);

    // Login throttling lives in Redis: with Redis away each instance throttles on its own; logins still work.
    const login = await new Client(b.url).post('/login', { email, password: 'correct horse battery' });
    expect(login.status, login.text).toBe(200);
    const wrong = await new Client(b.url).post('/login', { email, password: 'wrong password' });
    expect(wrong.status, wrong.text).toBe(401);

    for (const inst of [a, b]) expect(inst.alive()).toBe(true);
    redis.restore();
    for (const inst of [a, b]) await waitRedisUp(inst, 1);
  }, 120_000);

  it('refuses a key revoked while Redis was away once Redis returns, whatever the TTL', async () => {
    const redis = await faultProxyTo(6379);
    // A minute of TTL: only the change feed or the flush on reconnect can explain a prompt refusal.
    const { a, b, onA } = await startPairBehind(redis, 60_000);
    const k = await createKeyOn(onA, 'flush on reconnect');
    for (const inst of [a, b]) await waitRedisUp(inst, 1);
    expect((await callProxy(b.url, k.key)).status).toBe(200);

    redis.cut('refuse');
    await waitRedisUp(b, 0);
    const revoked = await onA.post(`/keys/${k.id}/revoke`, {});
    expect(revoked.status, revoked.text).toBe(200);
    // The pub/sub message is lost; B may still learn of it from the database change feed (≤ 0.5 s), and
    // must in any case refuse the key at once after Redis returns (the reconnect flush).
    redis.restore();
    await waitRedisUp(b, 1);
    const r = await callProxy(b.url, k.key);
    expect(r.status, r.text).toBe(401);
    expect(r.text).toContain('proxy_key_revoked');
  }, 120_000);

  it('reports a silent Redis (partition) as down, and answers revocations and logins without hanging', async () => {
    const redis = await faultProxyTo(6379);
    const { a, onA, email } = await startPairBehind(redis, TTL_MS);
    const k = await createKeyOn(onA, 'partition');
    await waitRedisUp(a, 1);

    redis.cut('blackhole');
    const timed = async <T>(fn: () => Promise<T>): Promise<[T, number]> => {
      const t = performance.now();
      const v = await fn();
      return [v, performance.now() - t];
    };
    const [revoked, revokeMs] = await timed(() => onA.post(`/keys/${k.id}/revoke`, {}));
    const [login, loginMs] = await timed(() =>
      new Client(a.url).post('/login', { email, password: 'correct horse battery' }),
    );
    console.log(
      `Redis partitioned: revoke answered ${revoked.status} in ${revokeMs.toFixed(0)} ms, ` +
        `login answered ${login.status} in ${loginMs.toFixed(0)} ms`,
    );
    expect(revoked.status, revoked.text).toBe(200);
    expect((await callProxy(a.url, k.key)).status).toBe(401);
    expect(login.status, login.text).toBe(200);
    expect(revokeMs).toBeLessThan(10_000);
    expect(loginMs).toBeLessThan(10_000);
    // The subscriber's heartbeat notices the silence.
    await waitRedisUp(a, 0);
    expect(a.alive()).toBe(true);
    redis.restore();
    await waitRedisUp(a, 1);
  }, 120_000);
});
