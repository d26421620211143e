/**
 * Several `keyrelay serve` processes on one PostgreSQL database and one Redis, as an operator runs them
 * behind a load balancer; plus the probes the multi-instance and outage tests share.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { Client } from '../console-harness.js';
import { startFakeAnthropic, startFakeOpenAI, type FakeUpstream } from '../fakes/index.js';
import { createTestDatabase, type TestDatabase } from './pg.js';
import { DEFAULT_THROTTLE_LIMITS } from '../../src/accounts/throttle.js';
import { startServeProcess, type ServeProcess } from './process.js';
import type { Tuning } from './tuning.js';

export const REDIS_URL = 'redis://127.0.0.1:6379';
const STOP_DEADLINE_MS = 45_000;

export interface Instance {
  url: string;
  proc: ServeProcess;
  /** True while the process has not exited. */
  alive(): boolean;
  /** SIGTERM, then waits for the exit (graceful drain and flush); resolves with the exit code. */
  stop(): Promise<number | null>;
}

/** `tuning`: internal values no variable sets (test/helpers/tuning.ts), e.g. a short key cache. */
export async function startInstance(env: Record<string, string>, tuning: Tuning = {}): Promise<Instance> {
  const dataDir = mkdtempSync(join(tmpdir(), 'keyrelay-cluster-'));
  const proc = await startServeProcess(
    { KEYRELAY_DATA_DIR: dataDir, ...env },
    {
      tuning: {
        // Every run of the suite signs up from 127.0.0.1 into the one Redis, whose per-IP window outlives
        // the run: CI's three runs (Node 20, 22, 24) within 15 minutes passed the default 20 sign-ups per IP.
        loginThrottle: { ...DEFAULT_THROTTLE_LIMITS, maxPerIp: 100_000 },
        ...tuning,
      },
    },
  );
  let exitCode: number | null | undefined;
  void proc.exited.then((code) => (exitCode = code));
  return {
    url: proc.url,
    proc,
    alive: () => exitCode === undefined,
    async stop() {
      if (exitCode === undefined) proc.child.kill('SIGTERM');
      // A drain that cannot finish (e.g. a test failed with its database cut) must not outlive the test.
      const killer = setTimeout(() => proc.child.kill('SIGKILL'), STOP_DEADLINE_MS);
      const code = await proc.exited;
      clearTimeout(killer);
      rmSync(dataDir, { recursive: true, force: true });
      return code;
    },
  };
}

// Enough sockets for the load loops; keep-alive so a poll loop measures keyrelay, not TCP handshakes.
export const dispatcher = new Agent({ connections: 64, keepAliveTimeout: 10_000 });

export interface ProxyReply {
  status: number;
  id: string;
  text: string;
}

/** One non-streaming OpenAI chat completion through keyrelay with the given proxy-api-key. */
export async function callProxy(base: string, key: string): Promise<ProxyReply> {
  const res = await request(`${base}/api/proxy/openai/v1/chat/completions`, {
    method: 'POST',
    dispatcher,
    headers: {
      'content-type': 'application/json',
      'proxy-api-key': key,
      authorization: 'Bearer sk-canary-openai-123',
    },
    body: JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] }),
  });
  const text = await res.body.text();
  return { status: res.statusCode, id: String(res.headers['x-keyrelay-request-id']), text };
}

/** The value of one Prometheus sample (`name` or `name{labels}` exactly as exposed), or null if absent. */
export async function readMetric(base: string, sample: string): Promise<number | null> {
  const res = await request(`${base}/metrics`, { dispatcher });
  const text = await res.body.text();
  for (const line of text.split('\n')) {
    if (line.startsWith(`${sample} `)) return Number(line.slice(sample.length + 1));
  }
  return null;
}

/** Polls until `probe` returns a value that is not undefined; throws with `what` at the deadline. */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  deadlineMs = 30_000,
  everyMs = 50,
): Promise<T> {
  const until = Date.now() + deadlineMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > until) throw new Error(`timed out after ${deadlineMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** The q-quantile (nearest rank) of a list of numbers. */
export function quantile(values: readonly number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

export interface Pair {
  db: TestDatabase;
  openai: FakeUpstream;
  anthropic: FakeUpstream;
  a: Instance;
  b: Instance;
  /** Signed in on A; the same session works on B (shared sessions). */
  onA: Client;
  onB: Client;
  close(): Promise<void>;
}

/**
 * Two instances on a fresh PostgreSQL database and the real Redis, with fake upstreams and one signed-in
 * account. The key cache TTL is a minute: only the Redis fan-out (or the database change feed) can explain
 * a revocation seen within a second. Both start at once: the migration lock must let them start together
 * on an empty database.
 */
export async function startPair(
  emailPrefix: string,
  extraEnv: Record<string, string> = {},
  tuning: Tuning = {},
): Promise<Pair> {
  const db = await createTestDatabase();
  const openai = await startFakeOpenAI();
  const anthropic = await startFakeAnthropic();
  const env = {
    KEYRELAY_DATABASE_URL: db.url,
    KEYRELAY_REDIS_URL: REDIS_URL,
    KEYRELAY_OPENAI_UPSTREAM: openai.url,
    KEYRELAY_ANTHROPIC_UPSTREAM: anthropic.url,
    ...extraEnv,
  };
  const tune: Tuning = { keyCacheTtlMs: 60_000, ...tuning };
  const [a, b] = await Promise.all([startInstance(env, tune), startInstance(env, tune)]);
  const onA = new Client(a.url);
  await onA.signup(`${emailPrefix}-${Date.now()}@example.com`);
  const onB = new Client(b.url);
  onB.cookie = onA.cookie;
  return {
    db,
    openai,
    anthropic,
    a,
    b,
    onA,
    onB,
    close: async () => {
      await Promise.allSettled([a.stop(), b.stop()]);
      await openai.close();
      await anthropic.close();
      await db.drop();
    },
  };
}
