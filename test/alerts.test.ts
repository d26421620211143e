/**
 * Alerts against real HTTP receivers started here: a budget crossed is delivered once per threshold, signed
 * so that docs/alerts.md's own verification snippet accepts it; 500s are retried; a receiver that never
 * answers or answers 3xx leaves a clear error in the delivery log and delays no proxied call; Slack's body;
 * error-rate and spend-spike rules; webhook targets refused (loopback, private, keyrelay itself); two
 * instances on one PostgreSQL database crossing a threshold together deliver it once; and a webhook name
 * whose resolver changes its answer between check and connect (DNS rebinding) reaches only what was checked;
 * a delivery whose instance is killed mid-retry is finished by one other instance once its lease runs out.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AlertDelivery } from '../src/store/alert-types.js';
import { Client } from './console-harness.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';
import { makeLogRow } from './helpers/log-rows.js';
import { createTestDatabase, type TestDatabase } from './helpers/pg.js';
import { startServeProcess, type ServeProcess } from './helpers/process.js';

interface Received {
  headers: IncomingHttpHeaders;
  body: string;
}

/** A webhook receiver: answers each request with the next of `answers` (then the last one, repeated). */
async function startReceiver(
  answers: ((res: ServerResponse) => void)[] = [(res) => res.end('ok')],
): Promise<{ url: string; got: Received[]; close(): Promise<void> }> {
  const got: Received[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      got.push({ headers: req.headers, body: Buffer.concat(parts).toString('utf8') });
      answers[Math.min(got.length - 1, answers.length - 1)]!(res);
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    got,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

const status =
  (code: number, headers: Record<string, string> = {}) =>
  (res: ServerResponse) => {
    res.writeHead(code, headers);
    res.end();
  };

type Verify = (secret: string, headers: IncomingHttpHeaders, rawBody: string, tolerance?: number) => boolean;

/** docs/alerts.md's verification snippet, exactly as a reader copies it. */
async function documentedVerifier(): Promise<Verify> {
  const doc = readFileSync(new URL('../docs/alerts.md', import.meta.url), 'utf8');
  const snippet = /## Verifying a delivery[\s\S]*?```js\n([\s\S]*?)```/.exec(doc)?.[1];
  if (!snippet) throw new Error('docs/alerts.md has no verification snippet');
  const dir = mkdtempSync(join(tmpdir(), 'keyrelay-verify-'));
  const file = join(dir, 'verify.mjs');
  writeFileSync(file, snippet);
  const mod = (await import(pathToFileURL(file).href)) as { verifyKeyrelaySignature: Verify };
  rmSync(dir, { recursive: true, force: true });
  return mod.verifyKeyrelaySignature;
}

async function until<T>(
  what: string,
  probe: () => Promise<T | undefined> | T | undefined,
  ms = 15_000,
): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const TUNING = { alerts: { intervalMs: 3_600_000, retryDelaysMs: [50, 100], timeoutMs: 400 } };

async function signIn(h: Harness, email: string): Promise<{ c: Client; accountId: string; key: string }> {
  const u = await h.newUser(email);
  const c = new Client(h.url);
  const login = await c.post('/login', { email, password: 'correct horse battery' });
  expect(login.status).toBe(200);
  return { c, accountId: u.accountId, key: u.key };
}

function chat(h: Harness, key: string, headers: Record<string, string> = {}, apiKey = 'sk-test-alerts') {
  return new OpenAI({
    apiKey,
    baseURL: `${h.url}/api/proxy/openai/v1`,
    maxRetries: 0,
    defaultHeaders: { 'proxy-api-key': key, ...headers },
  }).chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] });
}

async function deliveries(c: Client, org: string): Promise<AlertDelivery[]> {
  const r = await c.get(`/orgs/${org}/alert-deliveries`);
  expect(r.status).toBe(200);
  return r.json.deliveries as AlertDelivery[];
}

/** The organization's deliveries once none is pending any more. */
function settled(c: Client, org: string, count: number): Promise<AlertDelivery[]> {
  return until(`${count} settled deliveries`, async () => {
    const list = await deliveries(c, org);
    return list.length === count && list.every((d) => d.state !== 'pending') ? list : undefined;
  });
}

describe('alerts on one instance', () => {
  let h: Harness;
  let verify: Verify;
  let n = 0;

  beforeAll(async () => {
    h = await startHarness({}, TUNING);
    verify = await documentedVerifier();
  });
  afterAll(async () => {
    await h.close();
  });

  /** A user whose organization may send to 127.0.0.1 (the operator's instance-wide allowance). */
  async function user() {
    await h.kr.services.configStore.setSetting('alerts_allow_private_targets', 'true');
    return signIn(h, `alerts${++n}-${Date.now()}@example.com`);
  }

  async function costOfOneCall(h2: Harness, key: string, accountId: string): Promise<number> {
    await chat(h2, key);
    await h2.flushLog();
    const rows = await h2.kr.services.logStore.listRecent({ limit: 1, account_id: accountId });
    expect(rows[0]!.cost_usd).toBeGreaterThan(0);
    return rows[0]!.cost_usd!;
  }

  it('refuses webhook targets on loopback and private addresses unless allowed, and keyrelay itself always', async () => {
    const u = await user();
    const rule = (url: string) => ({
      name: 'b',
      kind: 'budget',
      params: { budget_usd: 1, period: 'day', thresholds: [50] },
      url,
    });
    await h.kr.services.configStore.setSetting('alerts_allow_private_targets', 'false');
    for (const url of [
      'http://127.0.0.1:9/hook',
      'http://[::1]:9/hook',
      'http://10.1.2.3/hook',
      'http://169.254.169.254/latest/meta-data',
      'http://192.168.1.10/hook',
      'http://localhost:9/hook',
    ]) {
      const r = await u.c.post(`/orgs/${u.accountId}/alerts`, rule(url));
      expect(r.status, url).toBe(400);
      expect(r.json.error.code).toBe('alert_target_refused');
      expect(r.json.error.message).toMatch(/loopback or private/);
    }
    await h.kr.services.configStore.setSetting('alerts_allow_private_targets', 'true');
    for (const url of [`${h.url}/api/console/me`, h.url.replace('127.0.0.1', 'localhost')]) {
      const r = await u.c.post(`/orgs/${u.accountId}/alerts`, rule(url));
      expect(r.status, url).toBe(400);
      expect(r.json.error.message).toMatch(/keyrelay itself/);
    }
    for (const url of ['ftp://203.0.114.10/x', 'https://user:pw@203.0.114.10/x', 'not a url']) {
      const r = await u.c.post(`/orgs/${u.accountId}/alerts`, rule(url));
      expect(r.json.error.code, url).toBe('alert_target_refused');
    }
    const bad = await u.c.post(`/orgs/${u.accountId}/alerts`, {
      ...rule('http://127.0.0.1:9/'),
      kind: 'nope',
    });
    expect(bad.json.error).toMatchObject({ code: 'invalid_alert_rule' });
    expect((await u.c.get(`/orgs/${u.accountId}/alerts`)).json.rules).toEqual([]);
  });

  it('delivers each budget threshold once per period, signed as docs/alerts.md verifies', async () => {
    const rx = await startReceiver();
    try {
      const u = await user();
      const cost = await costOfOneCall(h, u.key, u.accountId);
      const created = await u.c.post(`/orgs/${u.accountId}/alerts`, {
        name: 'daily budget',
        kind: 'budget',
        params: { budget_usd: cost * 1.5, period: 'day', thresholds: [50, 100] },
        url: rx.url,
      });
      expect(created.status).toBe(201);
      const secret = created.json.secret as string;
      expect(secret).toMatch(/^whsec_/);
      await h.kr.services.alerts.runOnce();
      await h.kr.services.alerts.runOnce();
      const [first] = await settled(u.c, u.accountId, 1);
      expect(rx.got).toHaveLength(1);
      await chat(h, u.key);
      await h.flushLog();
      await h.kr.services.alerts.runOnce();
      await h.kr.services.alerts.runOnce();
      await settled(u.c, u.accountId, 2);
      expect(rx.got).toHaveLength(2);

      const bodies = rx.got.map((g) => JSON.parse(g.body) as Record<string, unknown>);
      expect(bodies.map((b) => (b.data as { threshold_percent: number }).threshold_percent)).toEqual([
        50, 100,
      ]);
      expect(bodies[0]).toMatchObject({
        type: 'keyrelay.alert',
        id: first!.id,
        kind: 'budget',
        org_id: u.accountId,
        rule: { id: created.json.id, name: 'daily budget', scope: 'org', scope_id: null },
      });
      for (const g of rx.got) {
        expect(g.headers['content-type']).toBe('application/json');
        expect(verify(secret, g.headers, g.body)).toBe(true);
        // A changed body, another secret or an old timestamp fails the same check.
        expect(verify(secret, g.headers, g.body.replace('budget', 'Budget'))).toBe(false);
        expect(verify('whsec_other', g.headers, g.body)).toBe(false);
        const old = { ...g.headers, 'x-keyrelay-timestamp': String(Math.floor(Date.now() / 1000) - 3600) };
        expect(verify(secret, old, g.body)).toBe(false);
      }
      expect(first).toMatchObject({ state: 'delivered', attempts: 1, response_status: 200, error: null });
    } finally {
      await rx.close();
    }
  });

  it('retries after 500s with backoff until the receiver takes it', async () => {
    const rx = await startReceiver([status(500), status(503), status(204)]);
    try {
      const u = await user();
      await costOfOneCall(h, u.key, u.accountId);
      await u.c.post(`/orgs/${u.accountId}/alerts`, {
        name: 'tiny',
        kind: 'budget',
        params: { budget_usd: 0.000001, period: 'month', thresholds: [100] },
        url: rx.url,
      });
      await h.kr.services.alerts.runOnce();
      const [d] = await settled(u.c, u.accountId, 1);
      expect(d).toMatchObject({ state: 'delivered', attempts: 3, response_status: 204, error: null });
      expect(rx.got).toHaveLength(3);
      // Every retry is the same delivery: one id to deduplicate on.
      expect(new Set(rx.got.map((g) => g.headers['x-keyrelay-delivery']))).toEqual(new Set([d!.id]));
    } finally {
      await rx.close();
    }
  });

  it('logs a receiver that never answers and one that redirects, and keeps proxying meanwhile', async () => {
    const hang = await startReceiver([() => {}]); // reads the request, never answers
    const redirect = await startReceiver([status(302, { location: 'http://127.0.0.1:1/elsewhere' })]);
    try {
      const u = await user();
      await costOfOneCall(h, u.key, u.accountId);
      for (const [name, url] of [
        ['hangs', hang.url],
        ['redirects', redirect.url],
      ] as const)
        await u.c.post(`/orgs/${u.accountId}/alerts`, {
          name,
          kind: 'budget',
          params: { budget_usd: 0.000001, period: 'month', thresholds: [100] },
          url,
        });
      await h.kr.services.alerts.runOnce();
      // Deliveries under way: calls are answered as ever.
      const started = performance.now();
      for (let i = 0; i < 5; i++) await chat(h, u.key);
      expect(performance.now() - started).toBeLessThan(2_000);
      const list = await settled(u.c, u.accountId, 2);
      const rules = (await u.c.get(`/orgs/${u.accountId}/alerts`)).json.rules as {
        id: string;
        name: string;
      }[];
      const of = (name: string) => list.find((d) => d.rule_id === rules.find((r) => r.name === name)!.id)!;
      expect(of('hangs')).toMatchObject({ state: 'failed', attempts: 3, response_status: null });
      expect(of('hangs').error).toBe('no answer within 400 ms (gave up after 3 attempts)');
      expect(hang.got).toHaveLength(3);
      expect(of('redirects')).toMatchObject({ state: 'failed', attempts: 1, response_status: 302 });
      expect(of('redirects').error).toMatch(
        /^answered 302, a redirect to http:\/\/127\.0\.0\.1:1\/elsewhere: redirects are not followed/,
      );
      expect(redirect.got).toHaveLength(1);
    } finally {
      await hang.close();
      await redirect.close();
    }
  });

  it('sends a Slack-compatible body, and alerts on a key’s error rate', async () => {
    const rx = await startReceiver();
    try {
      const u = await user();
      const keys = (await u.c.get('/keys')).json.keys as { id: string }[];
      const r = await u.c.post(`/orgs/${u.accountId}/alerts`, {
        name: 'failing key',
        scope: 'key',
        scope_id: keys[0]!.id,
        kind: 'error_rate',
        params: { window_minutes: 5, threshold_percent: 50, min_requests: 4 },
        url: rx.url,
        format: 'slack',
      });
      expect(r.status).toBe(201);
      await chat(h, u.key);
      for (let i = 0; i < 2; i++) await expect(chat(h, u.key, { 'x-fake-status': '500' })).rejects.toThrow();
      await h.flushLog();
      await h.kr.services.alerts.runOnce(); // 3 calls: under min_requests
      await expect(chat(h, u.key, { 'x-fake-status': '500' })).rejects.toThrow();
      await h.flushLog();
      await h.kr.services.alerts.runOnce();
      await h.kr.services.alerts.runOnce();
      const [d] = await settled(u.c, u.accountId, 1);
      expect(d!.state).toBe('delivered');
      expect(rx.got).toHaveLength(1);
      const body = JSON.parse(rx.got[0]!.body) as Record<string, unknown>;
      expect(Object.keys(body)).toEqual(['text']);
      expect(body.text).toMatch(
        /^:rotating_light: failing key: 75\.0% of 4 calls by key \S+ failed in the last 5 min/,
      );
      expect(verify(r.json.secret as string, rx.got[0]!.headers, rx.got[0]!.body)).toBe(true);
    } finally {
      await rx.close();
    }
  });

  it('alerts once on a key’s first use from a new provider credential, never on one it used before', async () => {
    const rx = await startReceiver();
    try {
      const u = await user();
      const keys = (await u.c.get('/keys')).json.keys as { id: string }[];
      await chat(h, u.key); // the credential the key already uses
      await h.flushLog();
      await new Promise((r) => setTimeout(r, 20));
      const r = await u.c.post(`/orgs/${u.accountId}/alerts`, {
        name: 'new credential',
        scope: 'key',
        scope_id: keys[0]!.id,
        kind: 'new_credential',
        params: {},
        url: rx.url,
      });
      expect(r.status).toBe(201);
      expect(r.json.params).toEqual({ known_days: 90 });
      await chat(h, u.key);
      await h.flushLog();
      await h.kr.services.alerts.runOnce();
      expect(await deliveries(u.c, u.accountId)).toEqual([]);
      for (let i = 0; i < 2; i++) await chat(h, u.key, {}, 'sk-test-someone-else');
      await h.flushLog();
      await h.kr.services.alerts.runOnce();
      await h.kr.services.alerts.runOnce();
      const [d] = await settled(u.c, u.accountId, 1);
      expect(d!.state).toBe('delivered');
      expect(rx.got).toHaveLength(1);
      const [row] = await h.kr.services.logStore.listRecent({ limit: 1, account_id: u.accountId });
      expect(d!.dedupe_key).toBe(`new_credential:${row!.credential_fingerprint}`);
      expect(rx.got[0]!.body).toContain(row!.credential_fingerprint!);
      expect(rx.got[0]!.body).not.toContain('sk-test-someone-else');
      expect(verify(r.json.secret as string, rx.got[0]!.headers, rx.got[0]!.body)).toBe(true);
    } finally {
      await rx.close();
    }
  });

  it('alerts on a member’s spend spike against the days before, not on a first day', async () => {
    const rx = await startReceiver();
    try {
      const u = await user();
      const rule = await u.c.post(`/orgs/${u.accountId}/alerts`, {
        name: 'spike',
        scope: 'member',
        scope_id: u.accountId,
        kind: 'spend_spike',
        params: { factor: 3, baseline_days: 2, min_usd: 0.5 },
        url: rx.url,
      });
      expect(rule.status).toBe(201);
      const row = (at: number, cost: number) =>
        makeLogRow({ at, account_id: u.accountId, org_id: u.accountId, key_id: 'k', cost_usd: cost });
      const now = Date.now();
      await h.kr.services.logStore.insertBatch([row(now - 1000, 2)]);
      await h.kr.services.alerts.runOnce(); // today $2, no history: no baseline
      expect(await deliveries(u.c, u.accountId)).toEqual([]);
      const day = 86_400_000;
      await h.kr.services.logStore.insertBatch([row(now - day, 0.5), row(now - 2 * day, 0.5)]);
      await h.kr.services.alerts.runOnce(); // $2 against a mean of $0.50: 4×
      const [d] = await settled(u.c, u.accountId, 1);
      expect(JSON.parse(d!.payload)).toMatchObject({
        kind: 'spend_spike',
        data: { spent_usd: 2, baseline_mean_usd: 0.5, baseline_days: 2 },
      });
    } finally {
      await rx.close();
    }
  });
});

describe('two instances on one database', () => {
  let db: TestDatabase;
  let a: Harness;
  let b: Harness;

  beforeAll(async () => {
    db = await createTestDatabase();
    a = await startHarness({ KEYRELAY_DATABASE_URL: db.url }, TUNING);
    b = await startHarness({ KEYRELAY_DATABASE_URL: db.url }, TUNING);
  });
  afterAll(async () => {
    await a.close();
    await b.close();
    await db.drop();
  });

  it('deliver a threshold both see crossed at once exactly once', async () => {
    const rx = await startReceiver();
    try {
      await a.kr.services.configStore.setSetting('alerts_allow_private_targets', 'true');
      const u = await signIn(a, `pair-${Date.now()}@example.com`);
      const made = await u.c.post(`/orgs/${u.accountId}/alerts`, {
        name: 'budget',
        kind: 'budget',
        params: { budget_usd: 0.000001, period: 'day', thresholds: [80] },
        url: rx.url,
      });
      expect(made.status).toBe(201);
      await chat(a, u.key);
      await chat(b, u.key);
      await a.flushLog();
      await b.flushLog();
      for (let i = 0; i < 5; i++)
        await Promise.all([a.kr.services.alerts.runOnce(), b.kr.services.alerts.runOnce()]);
      await settled(u.c, u.accountId, 1);
      await new Promise((r) => setTimeout(r, 300));
      expect(rx.got).toHaveLength(1);
    } finally {
      await rx.close();
    }
  });
});

describe('webhook names resolved once per attempt', () => {
  /**
   * The resolver keyrelay's production code is given (config `alerts.lookup`): a name under the test's
   * control that answers `first` for the first `times` queries and `then` after, as a DNS server with TTL 0
   * does when it rebinds a name between keyrelay's check and its connect.
   */
  const names = new Map<string, { first: string; times: number; then: string; asked: number }>();
  let h: Harness;

  beforeAll(async () => {
    h = await startHarness(
      {},
      {
        alerts: {
          ...TUNING.alerts,
          lookup: (host) => {
            const n = names.get(host);
            if (!n) return Promise.reject(new Error(`getaddrinfo ENOTFOUND ${host}`));
            return Promise.resolve([n.asked++ < n.times ? n.first : n.then]);
          },
        },
      },
    );
  });
  afterAll(async () => {
    await h.close();
  });

  async function ruleTo(u: { c: Client; accountId: string }, url: string): Promise<void> {
    const made = await u.c.post(`/orgs/${u.accountId}/alerts`, {
      name: 'budget',
      kind: 'budget',
      params: { budget_usd: 0.000001, period: 'day', thresholds: [50] },
      url,
    });
    expect(made.status, JSON.stringify(made.json)).toBe(201);
  }

  it('never connects to a loopback address a name turned to after its public answer was checked', async () => {
    const rx = await startReceiver();
    try {
      await h.kr.services.configStore.setSetting('alerts_allow_private_targets', 'false');
      const port = new URL(rx.url).port;
      // Public when the rule is saved and when the attempt is checked; loopback from then on.
      names.set('hooks.rebind.test', { first: '203.0.113.7', times: 2, then: '127.0.0.1', asked: 0 });
      const u = await signIn(h, `rebind-${Date.now()}@example.com`);
      await ruleTo(u, `http://hooks.rebind.test:${port}/hook`);
      await chat(h, u.key);
      await h.flushLog();
      await h.kr.services.alerts.runOnce();
      const [d] = await settled(u.c, u.accountId, 1);
      expect(rx.got).toHaveLength(0);
      expect(d!.state).toBe('failed');
      expect(d!.error).toMatch(/loopback or private/);
    } finally {
      await rx.close();
    }
  });

  it('connects to the address it checked, with the name in Host, when private targets are allowed', async () => {
    const rx = await startReceiver();
    try {
      await h.kr.services.configStore.setSetting('alerts_allow_private_targets', 'true');
      const port = new URL(rx.url).port;
      // The receiver listens on 127.0.0.1 only: a second resolution (127.0.0.2) would be refused.
      names.set('hooks.pinned.test', { first: '127.0.0.1', times: 2, then: '127.0.0.2', asked: 0 });
      const u = await signIn(h, `pinned-${Date.now()}@example.com`);
      await ruleTo(u, `http://hooks.pinned.test:${port}/hook`);
      await chat(h, u.key);
      await h.flushLog();
      await h.kr.services.alerts.runOnce();
      const [d] = await settled(u.c, u.accountId, 1);
      expect(d!.state, d!.error ?? '').toBe('delivered');
      expect(d!.attempts).toBe(1);
      expect(rx.got).toHaveLength(1);
      expect(rx.got[0]!.headers.host).toBe(`hooks.pinned.test:${port}`);
      expect(names.get('hooks.pinned.test')!.asked).toBe(2);
    } finally {
      await rx.close();
    }
  });
});

describe('a delivery whose instance dies mid-retry', () => {
  let db: TestDatabase;
  let b: Harness;
  let c: Harness | undefined;
  let a: ServeProcess | undefined;
  const dataDir = mkdtempSync(join(tmpdir(), 'keyrelay-alerts-dead-'));

  beforeAll(async () => {
    db = await createTestDatabase();
    b = await startHarness({ KEYRELAY_DATABASE_URL: db.url }, TUNING);
  });
  afterAll(async () => {
    if (a?.child.exitCode === null) a.child.kill('SIGKILL');
    await c?.close();
    await b.close();
    await db.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('is taken over by another instance once its lease runs out, and sent by one of them only', async () => {
    const rx = await startReceiver([status(500), (res) => res.end('ok')]);
    try {
      await b.kr.services.configStore.setSetting('alerts_allow_private_targets', 'true');
      const u = await signIn(b, `dies-${Date.now()}@example.com`);
      const made = await u.c.post(`/orgs/${u.accountId}/alerts`, {
        name: 'budget',
        kind: 'budget',
        params: { budget_usd: 0.000001, period: 'day', thresholds: [80] },
        url: rx.url,
      });
      expect(made.status).toBe(201);
      await chat(b, u.key);
      await b.flushLog();
      // Instance A, a process of its own, evaluates on its timer, claims the occasion, is answered 500 and
      // waits 5 s for its retry: it is killed in that wait, as a crash or an OOM kill would.
      a = await startServeProcess(
        { KEYRELAY_DATABASE_URL: db.url, KEYRELAY_DATA_DIR: dataDir },
        {
          tuning: {
            alerts: { intervalMs: 200, retryDelaysMs: [5_000], timeoutMs: 1_000, leaseMarginMs: 500 },
          },
        },
      );
      const [first] = await until('attempt 1 recorded', async () => {
        const list = await deliveries(u.c, u.accountId);
        return list[0]?.attempts === 1 ? list : undefined;
      });
      expect(first).toMatchObject({ state: 'pending', response_status: 500 });
      a.child.kill('SIGKILL');
      await a.exited;
      expect(rx.got).toHaveLength(1);
      // Past A's lease (its retry's time, the attempt's limit, the margin), a new instance starts (its
      // start takes over) while B runs its rounds: one of them sends attempt 2.
      await new Promise((r) => setTimeout(r, Date.parse(first!.updated_at) + 6_700 - Date.now()));
      const starting = startHarness({ KEYRELAY_DATABASE_URL: db.url }, TUNING);
      for (let i = 0; i < 5; i++) await b.kr.services.alerts.runOnce();
      c = await starting;
      const [d] = await settled(u.c, u.accountId, 1);
      await new Promise((r) => setTimeout(r, 300));
      expect(d).toMatchObject({ id: first!.id, state: 'delivered', attempts: 2, response_status: 200 });
      expect(rx.got).toHaveLength(2);
      expect(rx.got[1]!.headers['x-keyrelay-delivery']).toBe(first!.id);
      expect(rx.got[1]!.body).toBe(rx.got[0]!.body);
    } finally {
      await rx.close();
    }
  });
});
