/**
 * WebSocket flow control and limits on real sockets: a caller that stops reading pauses upstream (memory
 * stays bounded while upstream floods), the per-connection buffer cap closes both sides with a logged
 * reason, the maximum message size, the idle timeout, an unreachable upstream.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from './helpers/keyrelay.js';
import { mustOpen, mustRefuse, openWs, wsUrl } from './helpers/ws.js';

const RT = '/api/proxy/openai/v1/realtime?model=gpt-realtime';
const AUTH = 'Bearer sk-test-ws-flow';

async function until(pred: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error('condition not reached');
    await new Promise((r) => setTimeout(r, 5));
  }
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function open(h: Harness, key: string) {
  const c = await mustOpen(
    openWs(wsUrl(h.url, RT), { headers: { 'proxy-api-key': key, authorization: AUTH } }),
  );
  await c.waitFor((e) => e.type === 'session.created');
  return { c, up: h.openai.ws.connections[h.openai.ws.connections.length - 1]! };
}

/** The socket's row, once written (it is queued when both sides have closed). */
async function socketRow(h: Harness, accountId: string) {
  for (let i = 0; i < 100; i++) {
    await h.flushLog();
    const rows = await h.kr.services.logStore.listRequests({ account_id: accountId }, { limit: 50 });
    const row = rows.items.find((r) => r.method === 'GET' && r.connection_id === r.id);
    if (row) return row;
    await sleep(20);
  }
  throw new Error('no socket row');
}

describe('a caller that stops reading', () => {
  let h: Harness;
  let u: { key: string; accountId: string };
  beforeAll(async () => {
    h = await startHarness({}, { ws: { highWaterBytes: 256 * 1024 } });
    u = await h.newUser();
  });
  afterAll(() => h.close());

  it('pauses upstream: the flood stalls, memory stays bounded, nothing is lost once it reads again', async () => {
    const { c, up } = await open(h, u.key);
    const COUNT = 2000;
    const SIZE = 64 * 1024; // 128 MB in all
    c.ws.pause(); // stops reading its socket: TCP backs up into keyrelay
    global.gc?.();
    const before = process.memoryUsage();
    c.ws.send(JSON.stringify({ type: 'fake.flood', count: COUNT, size: SIZE }));
    await until(() => up.flooded > 0);
    // Let the kernel buffers on both hops fill, then watch the flood stand still.
    let last = -1;
    for (let i = 0; i < 40 && up.flooded !== last; i++) {
      last = up.flooded;
      await sleep(250);
    }
    await sleep(500);
    expect(up.flooded).toBe(last);
    expect(up.flooded).toBeLessThan(COUNT);
    const after = process.memoryUsage();
    const grown = after.rss - before.rss;
    const sentMb = (up.flooded * SIZE) / 1e6;

    console.log(
      `flood paused after ${up.flooded}/${COUNT} messages (${sentMb.toFixed(1)} MB sent by upstream);` +
        ` test process RSS +${(grown / 1e6).toFixed(1)} MB, external +${((after.external - before.external) / 1e6).toFixed(1)} MB`,
    );
    // 128 MB would have flowed without backpressure; what is held is kernel buffers plus ~the high-water mark.
    expect(grown).toBeLessThan(64 * 1024 * 1024);
    c.ws.resume();
    await until(() => c.messages.filter((m) => m.binary).length === COUNT, 30_000);
    expect(up.flooded).toBe(COUNT);
    expect(c.messages.filter((m) => m.binary).every((m) => m.data.length === SIZE)).toBe(true);
    c.ws.close(1000);
    await c.closed;
  }, 60_000);

  it('rejects a message over the size limit with 1009 and closes upstream', async () => {
    const h2 = await startHarness({ KEYRELAY_WS_MAX_MESSAGE_BYTES: '1024' });
    try {
      const v = await h2.newUser();
      const { c, up } = await open(h2, v.key);
      c.ws.send('x'.repeat(2000));
      expect((await c.closed).code).toBe(1009);
      await until(() => up.closed !== undefined);
      expect(up.received.some((m) => m.data.length === 2000)).toBe(false);
    } finally {
      await h2.close();
    }
  });
});

describe('the per-connection buffer cap', () => {
  it('closes both sides with a logged reason when a non-reading caller lets it overflow', async () => {
    // High-water above the cap: nothing pauses upstream, so the cap is what stops the flood.
    const h = await startHarness(
      {},
      { ws: { highWaterBytes: 64 * 1024 * 1024, maxBufferBytes: 512 * 1024 } },
    );
    try {
      const u = await h.newUser();
      const { c, up } = await open(h, u.key);
      c.ws.pause();
      c.ws.send(JSON.stringify({ type: 'fake.flood', count: 4000, size: 64 * 1024 }));
      await until(() => up.closed !== undefined, 20_000);
      expect(up.closed).toMatchObject({ code: 1008, reason: 'keyrelay: caller not reading (buffer cap)' });
      expect(up.flooded).toBeLessThan(4000);
      c.ws.resume();
      expect((await c.closed).code).toBe(1006); // its socket was cut: it could not take a close frame
      const row = await socketRow(h, u.accountId);
      expect(row).toMatchObject({
        error_code: 'proxy_ws_buffer_exceeded',
        ws_close_code: 1008,
        ws_close_reason: 'keyrelay: caller not reading (buffer cap)',
      });
    } finally {
      await h.close();
    }
  }, 60_000);
});

describe('idle timeout and unreachable upstream', () => {
  it('closes an idle socket on both sides with 1001', async () => {
    const h = await startHarness({}, { ws: { idleTimeoutMs: 300 } });
    try {
      const u = await h.newUser();
      const { c, up } = await open(h, u.key);
      const end = await c.closed;
      expect(end).toMatchObject({ code: 1001, reason: 'keyrelay: idle timeout' });
      await until(() => up.closed !== undefined);
      expect(up.closed).toMatchObject({ code: 1001, reason: 'keyrelay: idle timeout' });
      expect(await socketRow(h, u.accountId)).toMatchObject({
        outcome: 'timeout',
        error_code: 'proxy_ws_idle_timeout',
      });
    } finally {
      await h.close();
    }
  });

  it('answers 502 proxy_upstream_unreachable when upstream refuses the connection', async () => {
    const h = await startHarness({ KEYRELAY_OPENAI_UPSTREAM: 'http://127.0.0.1:1' });
    try {
      const u = await h.newUser();
      const r = await mustRefuse(openWs(wsUrl(h.url, RT), { headers: { 'proxy-api-key': u.key } }));
      expect(r.status).toBe(502);
      expect(r.headers['x-keyrelay-error']).toBe('proxy_upstream_unreachable');
      expect(await socketRow(h, u.accountId)).toMatchObject({ status: 502, outcome: 'upstream_error' });
    } finally {
      await h.close();
    }
  });
});
