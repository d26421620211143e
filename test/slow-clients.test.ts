/**
 * A client that sends its request slowly, or opens many connections, is cut or refused;
 * with or without a key. Streams and slow upstream answers are never cut by these limits: they apply only
 * while the request is still arriving.
 */
import { connect, type Socket } from 'node:net';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from './helpers/keyrelay.js';

let h: Harness;
let key: string;
let port: number;

beforeAll(async () => {
  h = await startHarness(
    { KEYRELAY_MAX_CONNECTIONS: '40', KEYRELAY_MAX_CONNECTIONS_PER_IP: '5' },
    // Shorter than the defaults (two are constants in src/http-guard.ts) so each cut happens within the test.
    { guard: { clientHeadersTimeoutMs: 1500, clientRequestTimeoutMs: 4000, clientBodyIdleTimeoutMs: 1500 } },
  );
  ({ key } = await h.newUser());
  port = h.kr.port;
});
afterAll(() => h.close());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Held {
  socket: Socket;
  /** Everything the server sent. */
  received: () => string;
  /** Resolves with the time (ms since open) at which the server closed the connection. */
  closed: Promise<number>;
}

function open(localAddress = '127.0.0.1'): Promise<Held> {
  return new Promise((resolve, reject) => {
    const t0 = Date.now();
    const socket = connect({ port, host: '127.0.0.1', localAddress });
    let data = '';
    socket.on('data', (d: Buffer) => (data += d.toString('latin1')));
    socket.on('error', () => undefined);
    const closed = new Promise<number>((r) => socket.once('close', () => r(Date.now() - t0)));
    socket.once('connect', () => resolve({ socket, received: () => data, closed }));
    socket.once('error', reject);
  });
}

/** Writes `parts` one every `everyMs` until the socket closes. */
async function trickle(held: Held, parts: string[], everyMs: number): Promise<void> {
  for (const part of parts) {
    if (held.socket.destroyed || held.socket.writableEnded) return;
    held.socket.write(part);
    await sleep(everyMs);
  }
}

const within = (p: Promise<number>, ms: number) =>
  Promise.race([p, sleep(ms).then(() => Number.POSITIVE_INFINITY)]);

describe('slow clients', () => {
  it('cuts a connection whose headers never finish (no key needed)', async () => {
    const held = await open();
    void trickle(
      held,
      ['GET /healthz HTTP/1.1\r\n', ...Array.from({ length: 60 }, (_, i) => `x-${i}: a\r\n`)],
      200,
    );
    const t = await within(held.closed, 10_000);
    expect(t).toBeGreaterThan(1_000);
    expect(t).toBeLessThan(10_000);
  });

  it('answers 408 to a console login body that stops arriving', async () => {
    const held = await open();
    held.socket.write(
      'POST /api/console/login HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: 200\r\n\r\n{"email":',
    );
    const t = await within(held.closed, 10_000);
    expect(t).toBeLessThan(10_000);
    expect(held.received()).toMatch(/^HTTP\/1\.1 408 /);
  });

  it('cuts a console body that trickles in, within the headers timeout (no key needed to send one)', async () => {
    const held = await open();
    held.socket.write(
      'POST /api/console/login HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: 200\r\n\r\n{',
    );
    void trickle(
      held,
      Array.from({ length: 100 }, () => ' '),
      400,
    );
    const t = await within(held.closed, 10_000);
    // The headers timeout (1.5 s) bounds it, well before the whole-request one (4 s).
    expect(t).toBeGreaterThan(1_000);
    expect(t).toBeLessThan(3_500);
    expect(held.received()).toMatch(/^HTTP\/1\.1 408 /);
  });

  it('cuts a proxy body that trickles in under the idle timeout but never ends', async () => {
    const held = await open();
    held.socket.write(
      `POST /api/proxy/openai/v1/chat/completions HTTP/1.1\r\nHost: x\r\nproxy-api-key: ${key}\r\n` +
        'content-type: application/json\r\ncontent-length: 100000\r\n\r\n',
    );
    void trickle(
      held,
      Array.from({ length: 100 }, () => 'x'),
      500,
    );
    const t = await within(held.closed, 12_000);
    expect(t).toBeGreaterThan(3_000);
    expect(t).toBeLessThan(12_000);
    expect(h.openai.requests.filter((r) => r.body.length === 100000)).toHaveLength(0);
  });

  it('never cuts a slow upstream answer or a long stream (the timeouts end with the request)', async () => {
    const body = JSON.stringify({
      model: 'gpt-4o',
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
    });
    const started = Date.now();
    const dispatcher = new Agent();
    const [slowHead, longStream] = await Promise.all([
      request(`${h.url}/api/proxy/openai/v1/chat/completions`, {
        method: 'POST',
        dispatcher,
        headers: {
          'proxy-api-key': key,
          'content-type': 'application/json',
          'x-fake-first-byte-delay-ms': '5500',
        },
        body: JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] }),
      }),
      request(`${h.url}/api/proxy/openai/v1/chat/completions`, {
        method: 'POST',
        dispatcher,
        headers: {
          'proxy-api-key': key,
          'content-type': 'application/json',
          'x-fake-events': '12',
          'x-fake-event-delay-ms': '500',
        },
        body,
      }),
    ]);
    expect(slowHead.statusCode).toBe(200);
    expect(((await slowHead.body.json()) as { object: string }).object).toBe('chat.completion');
    expect(longStream.statusCode).toBe(200);
    expect(await longStream.body.text()).toContain('data: [DONE]');
    expect(Date.now() - started).toBeGreaterThan(5_000);
    await dispatcher.close();
  }, 20_000);

  it('caps connections per address (not 127.0.0.1) and in all; closing frees the place', async () => {
    const fromOther = await Promise.all(Array.from({ length: 8 }, () => open('127.0.0.2')));
    await sleep(300);
    const cut = await Promise.all(fromOther.map((c) => within(c.closed, 200)));
    expect(cut.filter((t) => t !== Number.POSITIVE_INFINITY)).toHaveLength(3);
    const fromLoopback = await Promise.all(Array.from({ length: 30 }, () => open()));
    await sleep(300);
    const loopbackCut = await Promise.all(fromLoopback.map((c) => within(c.closed, 200)));
    expect(loopbackCut.filter((t) => t !== Number.POSITIVE_INFINITY)).toHaveLength(0);
    // 5 + 30 open; the total cap (40) leaves room for 5 more.
    const more = await Promise.all(Array.from({ length: 10 }, () => open()));
    await sleep(300);
    const moreCut = await Promise.all(more.map((c) => within(c.closed, 200)));
    expect(moreCut.filter((t) => t !== Number.POSITIVE_INFINITY)).toHaveLength(5);
    for (const c of [...fromOther, ...fromLoopback, ...more]) c.socket.destroy();
    await sleep(300);
    const res = await request(`${h.url}/healthz`, { reset: true });
    expect(res.statusCode).toBe(200);
    await res.body.dump();
    const again = await Promise.all(Array.from({ length: 5 }, () => open('127.0.0.2')));
    await sleep(300);
    const againCut = await Promise.all(again.map((c) => within(c.closed, 200)));
    expect(againCut.filter((t) => t !== Number.POSITIVE_INFINITY)).toHaveLength(0);
    for (const c of again) c.socket.destroy();
  });
});
