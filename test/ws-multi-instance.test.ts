/**
 * Two `keyrelay serve` processes on one PostgreSQL and one Redis: a key revoked on A closes the key's open
 * WebSockets on B (1008, keyrelay's code as the reason) within a second, over several trials; the socket
 * rows written through B reach the shared log.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from './console-harness.js';
import type { FakeUpstream } from './fakes/index.js';
import { quantile, startInstance, startPair, waitFor, type Instance, type Pair } from './helpers/cluster.js';
import type { TestDatabase } from './helpers/pg.js';
import { mustOpen, openWs, wsUrl } from './helpers/ws.js';

const TRIALS = 10;

let pair: Pair;
let db: TestDatabase;
let openai: FakeUpstream;
let anthropic: FakeUpstream;
let b: Instance;
let onA: Client;

beforeAll(async () => {
  pair = await startPair('ws-multi');
  ({ db, openai, anthropic, b, onA } = pair);
}, 120_000);

afterAll(() => pair?.close(), 120_000);

describe('WebSockets across instances', () => {
  it('a key revoked on A closes its sockets on B with 1008 within a second', async () => {
    const latencies: number[] = [];
    for (let i = 0; i < TRIALS; i++) {
      const r = await onA.post('/keys', { name: `ws trial ${i}` });
      expect(r.status, r.text).toBe(201);
      const k = { id: r.json.key.id as string, key: r.json.key.key as string };
      const path =
        i % 2 ? '/api/proxy/openai/v1/responses' : '/api/proxy/openai/v1/realtime?model=gpt-realtime';
      const c = await mustOpen(openWs(wsUrl(b.url, path), { headers: { 'proxy-api-key': k.key } }));
      const started = performance.now();
      const revoked = await onA.post(`/keys/${k.id}/revoke`, {});
      expect(revoked.status, revoked.text).toBe(200);
      const end = await c.closed;
      latencies.push(performance.now() - started);
      expect(end).toMatchObject({ code: 1008, reason: 'keyrelay: proxy_key_revoked' });
    }
    console.log(
      `socket on B closed after revocation on A, ${TRIALS} trials: p50 ${quantile(latencies, 0.5).toFixed(1)} ms, ` +
        `max ${Math.max(...latencies).toFixed(1)} ms`,
    );
    expect(Math.max(...latencies)).toBeLessThan(1000);
    // The socket rows written through B are in the shared log, as A's console sees it.
    const rows = await waitFor('socket rows in the shared log', async () => {
      const page = await onA.get('/requests?limit=100');
      const items = (page.json.items as { method: string; ws_close_code: number | null }[]).filter(
        (x) => x.method === 'GET',
      );
      return items.length >= TRIALS ? items : undefined;
    });
    expect(rows.every((x) => x.ws_close_code === 1008)).toBe(true);
  }, 120_000);

  it('without Redis, the database change feed closes them within a second too; SIGTERM drains them', async () => {
    const env = {
      KEYRELAY_DATABASE_URL: db.url,
      KEYRELAY_OPENAI_UPSTREAM: openai.url,
      KEYRELAY_ANTHROPIC_UPSTREAM: anthropic.url,
      KEYRELAY_DRAIN_TIMEOUT_MS: '500',
    };
    const tuning = { keyCacheTtlMs: 60_000 };
    const [c1, c2] = await Promise.all([startInstance(env, tuning), startInstance(env, tuning)]);
    try {
      const admin = new Client(c1.url);
      admin.cookie = onA.cookie;
      const latencies: number[] = [];
      for (let i = 0; i < 5; i++) {
        const r = await admin.post('/keys', { name: `feed trial ${i}` });
        const k = { id: r.json.key.id as string, key: r.json.key.key as string };
        const c = await mustOpen(
          openWs(wsUrl(c2.url, '/api/proxy/openai/v1/realtime?model=gpt-realtime'), {
            headers: { 'proxy-api-key': k.key },
          }),
        );
        const started = performance.now();
        expect((await admin.post(`/keys/${k.id}/revoke`, {})).status).toBe(200);
        expect(await c.closed).toMatchObject({ code: 1008, reason: 'keyrelay: proxy_key_revoked' });
        latencies.push(performance.now() - started);
      }
      console.log(
        `change feed only: closed after p50 ${quantile(latencies, 0.5).toFixed(0)} ms, max ${Math.max(...latencies).toFixed(0)} ms`,
      );
      expect(Math.max(...latencies)).toBeLessThan(1000);

      // SIGTERM: an open socket gets the drain timeout, then 1001; its rows reach the shared log.
      const r = await admin.post('/keys', { name: 'sigterm' });
      const k = r.json.key.key as string;
      const c = await mustOpen(
        openWs(wsUrl(c2.url, '/api/proxy/openai/v1/realtime?model=gpt-realtime'), {
          headers: { 'proxy-api-key': k },
        }),
      );
      c.ws.send(JSON.stringify({ type: 'response.create', event_id: 'before-term' }));
      await c.waitFor((e) => e.type === 'response.done');
      const termAt = performance.now();
      const exited = c2.stop();
      const end = await c.closed;
      expect(end).toMatchObject({ code: 1001, reason: 'keyrelay: shutting down' });
      expect(performance.now() - termAt).toBeGreaterThanOrEqual(400);
      expect(await exited).toBe(0);
      const rows = await waitFor('the drained socket rows', async () => {
        const page = await admin.get(`/requests?key_id=${r.json.key.id as string}`);
        const items = page.json.items as { method: string; ws_close_code: number | null }[];
        return items.length >= 2 ? items : undefined;
      });
      expect(rows.map((x) => [x.method, x.ws_close_code]).sort()).toEqual([
        ['GET', 1001],
        ['WS', null],
      ]);
    } finally {
      await Promise.allSettled([c1.stop(), c2.stop()]);
    }
  }, 120_000);
});
