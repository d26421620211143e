/**
 * WebSocket accounting on real sockets: the official `openai` package's Realtime and Responses WebSocket
 * clients get the same events through keyrelay as directly (compared by hash, both directions), and each
 * model response on a socket is one log row with its usage, audio tokens, cost (computed here from the
 * price library), latency, time to first delta, bodies (audio elided) and the socket's connection_id; the
 * socket is one more row.
 */
import { createHash } from 'node:crypto';
import { connect } from 'node:net';
import { calcPrice } from '@pydantic/genai-prices';
import OpenAI from 'openai';
import { OpenAIRealtimeWS } from 'openai/realtime/ws';
import { ResponsesWS } from 'openai/resources/responses/ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_REALTIME_USAGE, DEFAULT_RESPONSES_USAGE, FAKE_AUDIO } from './fakes/index.js';
import type { RequestLogRow } from '../src/types.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';

let h: Harness;
let u: { key: string; keyId: string; accountId: string };
const API_KEY = 'sk-test-ws-accounting';

beforeAll(async () => {
  h = await startHarness();
  u = await h.newUser();
});
afterAll(() => h.close());

const sha = (parts: (string | Buffer)[]) => {
  const hash = createHash('sha256');
  for (const p of parts) hash.update(p).update('\u0000');
  return hash.digest('hex');
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function rowsOf(accountId: string, connectionId?: string, count = 1): Promise<RequestLogRow[]> {
  for (let i = 0; i < 200; i++) {
    await h.flushLog();
    const page = await h.kr.services.logStore.listRequests(
      { account_id: accountId, ...(connectionId ? { connection_id: connectionId } : {}) },
      { limit: 100 },
    );
    if (page.items.length >= count) {
      return Promise.all(
        page.items.map(async (r) => (await h.kr.services.logStore.getRequest(accountId, r.id))!),
      );
    }
    await sleep(20);
  }
  throw new Error('rows not written');
}

/** The SDK's Realtime client speaks wss://; the test servers are plain TCP, so its socket is plain too. */
const plainSocket = (o: { host?: string; port?: number }) => connect({ host: o.host!, port: o.port! });

async function realtimeConversation(baseURL: string, headers: Record<string, string>) {
  const client = new OpenAI({ apiKey: API_KEY, baseURL });
  const rt = new OpenAIRealtimeWS(
    { model: 'gpt-realtime', options: { headers, createConnection: plainSocket } as never },
    client,
  );
  const events: string[] = [];
  rt.on('event', (e) => events.push(JSON.stringify(e)));
  await new Promise<void>((resolve, reject) => {
    rt.socket.once('open', () => resolve());
    rt.socket.once('error', reject);
  });
  const done = (n: number) =>
    new Promise<void>((resolve) => {
      let seen = 0;
      rt.on('response.done', () => ++seen === n && resolve());
    });
  const finished = done(2);
  rt.send({ type: 'session.update', session: { type: 'realtime', instructions: 'Be brief.' } } as never);
  rt.send({ type: 'response.create', event_id: 'evt_c1', response: { instructions: 'Say hi ✓' } } as never);
  rt.send({
    type: 'response.create',
    event_id: 'evt_c2',
    response: { metadata: { n: '2' } },
    fake: { audio: true, deltas: 2 },
  } as never);
  await finished;
  const closed = new Promise<void>((r) => rt.socket.once('close', () => r()));
  rt.close({ code: 1000, reason: 'bye' });
  await closed;
  return events;
}

describe('the official Realtime client', () => {
  it('gets the same events through keyrelay as directly; upstream receives the same messages', async () => {
    const direct = await realtimeConversation(`${h.openai.url}/v1`, {});
    const directUp = h.openai.ws.connections[h.openai.ws.connections.length - 1]!;
    const relayed = await realtimeConversation(`${h.url}/api/proxy/openai/v1`, { 'proxy-api-key': u.key });
    const relayedUp = h.openai.ws.connections[h.openai.ws.connections.length - 1]!;
    expect(relayed.length).toBe(direct.length);
    expect(relayed.length).toBeGreaterThan(10);
    expect(sha(relayed)).toBe(sha(direct)); // upstream → caller
    expect(sha(relayedUp.received.map((m) => m.data))).toBe(sha(directUp.received.map((m) => m.data))); // caller → upstream
    for (let i = 0; i < 100 && !relayedUp.closed; i++) await sleep(10);
    expect(relayedUp.closed).toMatchObject({ code: 1000, reason: 'bye' });
  });

  it('logs one row per response.done with usage, audio tokens, cost, timings and bodies; and one for the socket', async () => {
    const all = await rowsOf(u.accountId, undefined, 3);
    const socket = all.find((r) => r.method === 'GET')!;
    expect(socket).toBeDefined();
    const rows = await rowsOf(u.accountId, socket.id, 3);
    // Ids sort by millisecond only: order the responses by the create that asked for them.
    const responses = rows
      .filter((r) => r.method === 'WS')
      .sort((a, b) => (a.request_body! < b.request_body! ? -1 : 1));
    expect(responses).toHaveLength(2);
    const d = DEFAULT_REALTIME_USAGE;
    const expectedCost = calcPrice(
      {
        input_tokens: d.input_tokens,
        cache_read_tokens: d.input_token_details.cached_tokens,
        output_tokens: d.output_tokens,
        input_audio_tokens: d.input_token_details.audio_tokens,
        cache_audio_read_tokens: d.input_token_details.cached_tokens_details.audio_tokens,
        output_audio_tokens: d.output_token_details.audio_tokens,
      },
      'gpt-realtime',
      { providerId: 'openai' },
    )!.total_price;
    for (const r of responses) {
      expect(r).toMatchObject({
        provider: 'openai',
        path: '/v1/realtime?model=gpt-realtime',
        model: 'gpt-realtime',
        status: 200,
        outcome: 'ok',
        connection_id: socket.id,
        input_tokens: 132,
        cache_read_tokens: 64,
        output_tokens: 121,
        input_audio_tokens: 13,
        cache_read_audio_tokens: 4,
        output_audio_tokens: 91,
        usage_source: 'provider',
      });
      expect(r.cost_usd).toBeCloseTo(expectedCost, 12);
      expect(r.latency_ms).toBeGreaterThan(0);
      expect(r.ttfb_ms).not.toBeNull();
      expect(r.ttfb_ms!).toBeLessThanOrEqual(r.latency_ms);
      expect(r.response_body).toContain('"realtime.response"');
      expect(r.response_body).not.toContain(FAKE_AUDIO);
      expect(r.response_body).toContain('[base64 elided');
      expect(r.request_headers.authorization).toBe('[redacted]');
      expect(JSON.stringify(r)).not.toContain(u.key);
      expect(JSON.stringify(r)).not.toContain(API_KEY);
    }
    expect(JSON.parse(responses[0]!.request_body!)).toEqual({
      type: 'response.create',
      event_id: 'evt_c1',
      response: { instructions: 'Say hi ✓' },
    });
    expect(socket).toMatchObject({
      method: 'GET',
      status: 101,
      outcome: 'ok',
      connection_id: socket.id,
      ws_close_code: 1000,
      ws_close_reason: 'bye',
      ws_messages_in: 3,
      input_tokens: null,
      cost_usd: null,
    });
    expect(socket.ws_messages_out).toBeGreaterThan(10);
    expect(socket.request_bytes).toBeGreaterThan(100);
    expect(socket.response_bytes).toBeGreaterThan(FAKE_AUDIO.length * 2);
  });
});

describe('Responses WebSocket mode through the official client', () => {
  async function conversation(baseURL: string, headers: Record<string, string>) {
    const client = new OpenAI({ apiKey: API_KEY, baseURL });
    const ws = new ResponsesWS(client, { headers });
    const events: string[] = [];
    let ends = 0;
    const finished = new Promise<void>((resolve) =>
      ws.on('event', (e) => {
        events.push(JSON.stringify(e));
        if (['response.completed', 'response.failed', 'response.incomplete'].includes(e.type) && ++ends === 3)
          resolve();
      }),
    );
    ws.on('error', () => {});
    ws.send({ type: 'response.create', model: 'gpt-4o-mini', input: 'one' } as never);
    ws.send({
      type: 'response.create',
      model: 'gpt-4o-mini',
      input: 'two',
      fake: { status: 'failed' },
    } as never);
    ws.send({
      type: 'response.create',
      model: 'gpt-4o',
      input: 'three',
      fake: { status: 'incomplete' },
    } as never);
    await finished;
    ws.close();
    await sleep(50);
    return events;
  }

  it('relays the same events both ways and logs completed, failed and incomplete responses', async () => {
    const v = await h.newUser();
    const direct = await conversation(`${h.openai.url}/v1`, {});
    const directUp = h.openai.ws.connections[h.openai.ws.connections.length - 1]!;
    const relayed = await conversation(`${h.url}/api/proxy/openai/v1`, { 'proxy-api-key': v.key });
    const relayedUp = h.openai.ws.connections[h.openai.ws.connections.length - 1]!;
    expect(sha(relayed)).toBe(sha(direct));
    expect(sha(relayedUp.received.map((m) => m.data))).toBe(sha(directUp.received.map((m) => m.data)));

    const rows = (await rowsOf(v.accountId, undefined, 4)).filter((r) => r.method === 'WS');
    const order = ['one', 'two', 'three'];
    const input = (r: RequestLogRow) =>
      order.indexOf((JSON.parse(r.request_body!) as { input: string }).input);
    rows.sort((a, b) => input(a) - input(b));
    expect(rows.map((r) => [r.model, r.outcome, r.status])).toEqual([
      ['gpt-4o-mini', 'ok', 200],
      ['gpt-4o-mini', 'upstream_error', 500],
      ['gpt-4o', 'ok', 200],
    ]);
    const du = DEFAULT_RESPONSES_USAGE;
    for (const r of rows) {
      expect(r).toMatchObject({
        path: '/v1/responses',
        input_tokens: du.input_tokens,
        cache_read_tokens: du.input_tokens_details.cached_tokens,
        output_tokens: du.output_tokens,
        reasoning_tokens: du.output_tokens_details.reasoning_tokens,
        usage_source: 'provider',
        input_audio_tokens: null,
      });
      const expected = calcPrice(
        {
          input_tokens: du.input_tokens,
          cache_read_tokens: du.input_tokens_details.cached_tokens,
          output_tokens: du.output_tokens,
        },
        r.model!,
        { providerId: 'openai' },
      )!.total_price;
      expect(r.cost_usd).toBeCloseTo(expected, 12);
      expect(r.ttfb_ms).not.toBeNull();
    }
    expect(JSON.parse(rows[0]!.request_body!)).toMatchObject({ type: 'response.create', input: 'one' });
  });

  it('keeps no bodies with proxy-log-bodies: false', async () => {
    const v = await h.newUser();
    await conversation(`${h.url}/api/proxy/openai/v1`, {
      'proxy-api-key': v.key,
      'proxy-log-bodies': 'false',
    });
    const rows = await rowsOf(v.accountId, undefined, 4);
    for (const r of rows) {
      expect(r.request_body).toBeNull();
      expect(r.response_body).toBeNull();
    }
    expect(rows.filter((r) => r.method === 'WS').every((r) => r.input_tokens === 150)).toBe(true);
  });
});

describe('responses cut short', () => {
  it('a response still open when the caller leaves, or when upstream drops, is still one row', async () => {
    const { openWs, mustOpen, wsUrl } = await import('./helpers/ws.js');
    const v = await h.newUser();
    const path = '/api/proxy/openai/v1/realtime?model=gpt-realtime';
    const headers = { 'proxy-api-key': v.key, authorization: `Bearer ${API_KEY}` };
    const c1 = await mustOpen(openWs(wsUrl(h.url, path), { headers }));
    c1.ws.send(JSON.stringify({ type: 'response.create', event_id: 'held', fake: { hold: true } }));
    await c1.waitFor((e) => e.type === 'response.output_text.delta');
    c1.ws.close(1000, 'leaving');
    const c2 = await mustOpen(openWs(wsUrl(h.url, path), { headers }));
    c2.ws.send(JSON.stringify({ type: 'response.create', event_id: 'dropped', fake: { hold: true } }));
    await c2.waitFor((e) => e.type === 'response.output_text.delta');
    c2.ws.send(JSON.stringify({ type: 'fake.drop' }));
    expect((await c2.closed).code).toBe(1011);
    const rows = (await rowsOf(v.accountId, undefined, 4)).filter((r) => r.method === 'WS');
    const byEvent = (id: string) => rows.find((r) => JSON.parse(r.request_body!).event_id === id)!;
    expect(byEvent('held')).toMatchObject({
      outcome: 'client_aborted',
      status: 0,
      usage_source: 'none',
      cost_usd: null,
    });
    expect(byEvent('held').ttfb_ms).not.toBeNull();
    expect(byEvent('dropped')).toMatchObject({ outcome: 'upstream_error', status: 0, usage_source: 'none' });
  });
});
