/**
 * Per-key controls on an open socket (docs/limits.md, docs/websockets.md): every response.create counts for the rate limit and is
 * checked against the budget and the model list; a refused one gets an `error` event in the protocol's
 * shape (the socket stays open) and a `refused` row. Revoking or rolling the key closes its sockets with
 * 1008 and keyrelay's code; shutdown gives sockets the drain timeout, then 1001, and flushes their rows.
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { revokeKey, rollKey, setKeyLimits } from '../src/keys/actions.js';
import type { KeyLimits } from '../src/store/types.js';
import type { RequestLogRow } from '../src/types.js';
import { computeCost } from '../src/metering/index.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';
import { mustOpen, mustRefuse, openWs, wsUrl, type WsClient } from './helpers/ws.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h.close());

const RT = '/api/proxy/openai/v1/realtime?model=gpt-realtime';
const RESP = '/api/proxy/openai/v1/responses';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const deps = () => ({ store: h.kr.services.configStore, bus: h.kr.services.bus });

async function until(pred: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error('condition not reached');
    await sleep(5);
  }
}

async function userWith(limits: Partial<KeyLimits>) {
  const u = await h.newUser();
  if (Object.keys(limits).length) await setKeyLimits(deps(), null, u.keyId, limits);
  return u;
}

async function open(path: string, key: string): Promise<WsClient> {
  return mustOpen(
    openWs(wsUrl(h.url, path), { headers: { 'proxy-api-key': key, authorization: 'Bearer sk-x' } }),
  );
}

const lastConn = () => h.openai.ws.connections[h.openai.ws.connections.length - 1]!;
const ofType = (c: WsClient, type: string) => c.events().filter((e) => e.type === type);

async function rows(accountId: string, count: number): Promise<RequestLogRow[]> {
  for (let i = 0; i < 200; i++) {
    await h.flushLog();
    const page = await h.kr.services.logStore.listRequests({ account_id: accountId }, { limit: 100 });
    if (page.items.length >= count)
      return Promise.all(
        page.items.map(async (r) => (await h.kr.services.logStore.getRequest(accountId, r.id))!),
      );
    await sleep(20);
  }
  throw new Error('rows not written');
}

describe('limits per response.create', () => {
  it('rate: the create over the limit gets a Realtime error event, is not sent upstream, and is logged refused', async () => {
    // Opening the socket is not billable (rate_limit_scope `billable`), so two creates fit.
    const u = await userWith({ rate_limit_rpm: 2 });
    const c = await open(RT, u.key);
    await c.waitFor((e) => e.type === 'session.created');
    for (let i = 1; i <= 3; i++) c.ws.send(JSON.stringify({ type: 'response.create', event_id: `evt_${i}` }));
    const err = await c.waitFor((e) => e.type === 'error');
    expect(err).toMatchObject({
      type: 'error',
      error: { type: 'keyrelay_error', code: 'proxy_rate_limited', event_id: 'evt_3' },
    });
    await until(() => ofType(c, 'response.done').length === 2);
    const up = lastConn();
    expect(up.received.filter((m) => m.data.toString().includes('response.create'))).toHaveLength(2);
    // The socket stays open and keeps relaying.
    c.ws.send('still here');
    await until(() => c.messages.some((m) => m.data.toString() === 'still here'));
    c.ws.close(1000);
    await c.closed;
    const all = await rows(u.accountId, 4);
    const refused = all.filter((r) => r.outcome === 'refused');
    expect(refused).toHaveLength(1);
    expect(refused[0]).toMatchObject({ method: 'WS', status: 429, error_code: 'proxy_rate_limited' });
    expect(JSON.parse(refused[0]!.request_body!)).toMatchObject({ event_id: 'evt_3' });
    expect(all.filter((r) => r.method === 'WS' && r.outcome === 'ok')).toHaveLength(2);
  });

  it('a caller cannot slip a create past the limits by reordering or escaping its type', async () => {
    const u = await userWith({ allowed_models: ['gpt-4o-mini'] });
    const c = await open(RESP, u.key);
    c.ws.send('{"model":"gpt-4o","input":"x","type":"response.create"}');
    c.ws.send('{"model":"gpt-4o","input":"y","type":"response\\u002ecreate"}');
    await until(() => ofType(c, 'error').length === 2);
    expect(lastConn().received).toHaveLength(0);
    c.ws.terminate();
  });

  it('model list on Responses WS mode: a forbidden model gets a Responses error event, an allowed one passes', async () => {
    const u = await userWith({ allowed_models: ['gpt-4o-mini'] });
    const c = await open(RESP, u.key);
    c.ws.send(JSON.stringify({ type: 'response.create', model: 'gpt-4o', input: 'no' }));
    const err = await c.waitFor((e) => e.type === 'error');
    expect(err).toMatchObject({
      type: 'error',
      status: 403,
      error: { type: 'keyrelay_error', code: 'proxy_key_forbidden' },
    });
    c.ws.send(JSON.stringify({ type: 'response.create', model: 'gpt-4o-mini', input: 'yes' }));
    await c.waitFor((e) => e.type === 'response.completed');
    c.ws.close();
    await c.closed;
  });

  it('budget: once a response has spent it, the next create is refused', async () => {
    const u = await userWith({ budget_usd: 0.01, budget_period: 'day' });
    const c = await open(RESP, u.key);
    await sleep(100); // the spend ledger loads the key's spend so far
    const usage = { input_tokens: 100_000, output_tokens: 10, total_tokens: 100_010 }; // ~$0.25 on gpt-4o
    c.ws.send(JSON.stringify({ type: 'response.create', model: 'gpt-4o', input: 'first', fake: { usage } }));
    await c.waitFor((e) => e.type === 'response.completed');
    c.ws.send(JSON.stringify({ type: 'response.create', model: 'gpt-4o', input: 'second' }));
    const err = await c.waitFor((e) => e.type === 'error');
    expect(err).toMatchObject({ status: 429, error: { code: 'proxy_budget_exceeded' } });
    c.ws.close();
    await c.closed;
    // A new socket for the spent key is refused before the upgrade.
    const r = await mustRefuse(openWs(wsUrl(h.url, RESP), { headers: { 'proxy-api-key': u.key } }));
    expect(r.status).toBe(429);
    expect(r.headers['x-keyrelay-error']).toBe('proxy_budget_exceeded');
    expect(Number(r.headers['retry-after'])).toBeGreaterThan(0);
  });

  it('hard budget: each create reserves its bound until its response ends; a socket closing releases it', async () => {
    // 10,000 output tokens of gpt-realtime at the price library's text rate; the budget holds one and a half.
    const bound = computeCost('openai', 'gpt-realtime', {
      input_tokens: 0,
      output_tokens: 10_000,
      cache_read_tokens: null,
      cache_write_tokens: null,
      reasoning_tokens: null,
      source: 'provider',
      model: null,
    }).cost_usd!;
    const u = await userWith({ budget_usd: bound * 1.5, budget_mode: 'hard', budget_period: 'day' });
    const create = (fake?: object) =>
      JSON.stringify({ type: 'response.create', response: { max_output_tokens: 10_000 }, fake });
    const c = await open(RT, u.key);
    await c.waitFor((e) => e.type === 'session.created');
    c.ws.send(create({ hold: true })); // started upstream, never finished: its reservation stays
    await c.waitFor((e) => e.type === 'response.created');
    c.ws.send(create());
    const err = await c.waitFor((e) => e.type === 'error');
    expect(err).toMatchObject({ type: 'error', error: { code: 'proxy_budget_exceeded' } });
    const up = lastConn();
    expect(up.received.filter((m) => m.data.toString().includes('response.create'))).toHaveLength(1);
    c.ws.close();
    await c.closed;
    // The held response ended with its socket (a row, cut short): its reservation is released.
    const again = await open(RT, u.key);
    again.ws.send(create());
    await again.waitFor((e) => e.type === 'response.done');
    again.ws.close();
    await again.closed;
  });

  it('rate: with scope `all`, opening a socket counts as a request; over the limit the upgrade is refused with 429', async () => {
    const billable = await userWith({ rate_limit_rpm: 1 });
    const opened = [await open(RESP, billable.key), await open(RESP, billable.key)]; // upgrades are free
    for (const o of opened) o.ws.close();
    const u = await userWith({ rate_limit_rpm: 1, rate_limit_scope: 'all' });
    const c = await open(RESP, u.key);
    const r = await mustRefuse(openWs(wsUrl(h.url, RESP), { headers: { 'proxy-api-key': u.key } }));
    expect(r.status).toBe(429);
    expect(r.headers['x-keyrelay-error']).toBe('proxy_rate_limited');
    expect(JSON.parse(r.body)).toMatchObject({
      error: { type: 'keyrelay_error', code: 'proxy_rate_limited' },
    });
    c.ws.close();
    await c.closed;
  });
});

describe('key changes close open sockets', () => {
  it('revoking the key closes its sockets with 1008 and the code, within a second', async () => {
    const u = await h.newUser();
    const other = await h.newUser();
    const c = await open(RT, u.key);
    const c2 = await open(RESP, u.key);
    const bystander = await open(RT, other.key);
    const up = lastConn();
    const metrics = await h.kr.services.metrics.registry.getSingleMetricAsString('keyrelay_websockets_open');
    expect(metrics).toMatch(/keyrelay_websockets_open [3-9]/); // these three, and any still closing
    const t0 = Date.now();
    await revokeKey(deps(), null, u.keyId);
    const end = await c.closed;
    expect(end).toMatchObject({ code: 1008, reason: 'keyrelay: proxy_key_revoked' });
    expect(end.at - t0).toBeLessThan(1000);
    expect((await c2.closed).code).toBe(1008);
    expect(bystander.ws.readyState).toBe(1);
    void up;
    bystander.ws.close();
    const socketRows = (await rows(u.accountId, 2)).filter((r) => r.method === 'GET');
    expect(socketRows.map((r) => [r.outcome, r.error_code, r.ws_close_code])).toEqual([
      ['refused', 'proxy_key_revoked', 1008],
      ['refused', 'proxy_key_revoked', 1008],
    ]);
  });

  it('rolling the key closes its sockets when the grace period ends', async () => {
    const u = await h.newUser();
    const c = await open(RT, u.key);
    const t0 = Date.now();
    await rollKey(deps(), { orgId: u.accountId }, u.keyId, 1);
    await sleep(300);
    expect(c.ws.readyState).toBe(1); // still inside the grace period
    const end = await c.closed;
    expect(end).toMatchObject({ code: 1008, reason: 'keyrelay: proxy_key_expired' });
    expect(end.at - t0).toBeGreaterThanOrEqual(900);
    expect(end.at - t0).toBeLessThan(3000);
  });
});

describe('shutdown', () => {
  it('gives open sockets the drain timeout, then closes them with 1001; their rows are flushed', async () => {
    const s = await startHarness({ KEYRELAY_DRAIN_TIMEOUT_MS: '600' });
    const u = await s.newUser();
    const c = await mustOpen(openWs(wsUrl(s.url, RT), { headers: { 'proxy-api-key': u.key } }));
    c.ws.send(JSON.stringify({ type: 'response.create', event_id: 'before' }));
    await c.waitFor((e) => e.type === 'response.done');
    const t0 = Date.now();
    const stopped = s.kr.stop();
    await sleep(200);
    // Still relaying during the drain.
    c.ws.send(JSON.stringify({ type: 'response.create', event_id: 'during' }));
    await until(() => c.events().filter((e) => e.type === 'response.done').length === 2);
    const end = await c.closed;
    expect(end).toMatchObject({ code: 1001, reason: 'keyrelay: shutting down' });
    expect(end.at - t0).toBeGreaterThanOrEqual(550);
    await stopped;
    const db = new Database(join(s.dataDir, 'requests.db'), { readonly: true });
    const stored = db.prepare('SELECT method, outcome, ws_close_code, connection_id FROM requests').all() as {
      method: string;
      ws_close_code: number | null;
    }[];
    db.close();
    expect(stored.filter((r) => r.method === 'WS')).toHaveLength(2);
    expect(stored.filter((r) => r.method === 'GET').map((r) => r.ws_close_code)).toEqual([1001]);
    await s.close();
  });
});
