/**
 * Ends of a stream: a caller that goes away cancels the upstream request at once (also before the
 * first byte); an upstream that drops or stalls ends the caller's response abnormally, never with a clean
 * end; an upstream redirect is handed back as it is, never followed.
 */
import { connect, type Socket } from 'node:net';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDecoy, type Decoy, type FakeUpstream } from './fakes/index.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';
import { rawExchange, rawHead } from './helpers/raw-http.js';

type Provider = 'openai' | 'anthropic';
const PATHS: Record<Provider, string> = { openai: '/v1/chat/completions', anthropic: '/v1/messages' };

let h: Harness;
let key: string;
let accountId: string;
let decoy: Decoy;

beforeAll(async () => {
  h = await startHarness({ KEYRELAY_IDLE_TIMEOUT_MS: '400' });
  ({ key, accountId } = await h.newUser());
  decoy = await startDecoy();
});
afterAll(async () => {
  await h.close();
  await decoy.close();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const fakeOf = (p: Provider): FakeUpstream => (p === 'openai' ? h.openai : h.anthropic);

function streamRequest(provider: Provider, fakeHeaders: string[], body?: string): string {
  const json =
    body ??
    JSON.stringify({ model: 'm', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }], stream: true });
  return (
    rawHead(`POST /api/proxy/${provider}${PATHS[provider]} HTTP/1.1`, [
      'Host: keyrelay.test',
      `proxy-api-key: ${key}`,
      'Content-Type: application/json',
      ...fakeHeaders,
      `Content-Length: ${Buffer.byteLength(json)}`,
      'Connection: close',
    ]) + json
  );
}

/** Opens a raw connection, sends `req`, resolves once `until` holds for what was received so far. */
function openUntil(req: string, until: (text: string) => boolean): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(h.kr.port, '127.0.0.1');
    let text = '';
    socket.on('error', reject);
    socket.on('data', (b: Buffer) => {
      text += b.toString('latin1');
      if (until(text)) resolve(socket);
    });
    socket.write(req);
  });
}

/** Waits for the fake's next server-side socket close after `count` closes; returns its timestamp. */
async function nextCloseAfter(fake: FakeUpstream, count: number, timeoutMs = 5000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  while (fake.socketsClosed.length <= count) {
    if (Date.now() > deadline) throw new Error('upstream socket was never closed');
    await sleep(2);
  }
  return fake.socketsClosed[count]!.at;
}

describe.each(['openai', 'anthropic'] as const)('%s: caller disconnects', (provider) => {
  beforeAll(async () => {
    // The first abort in a fresh process runs cold code paths (in this same process as the fakes, so it
    // delays their bookkeeping too); warm them up so the timed checks measure keyrelay, not the JIT.
    const fake = fakeOf(provider);
    const socket = await openUntil(streamRequest(provider, ['x-fake-event-delay-ms: 300']), (t) =>
      t.includes('\r\n\r\n'),
    );
    const closes = fake.socketsClosed.length;
    socket.destroy();
    await nextCloseAfter(fake, closes);
  });

  it('closes the upstream socket within 100 ms when the caller leaves mid-stream', async () => {
    const fake = fakeOf(provider);
    const before = fake.requests.length;
    const socket = await openUntil(
      streamRequest(provider, ['x-fake-event-delay-ms: 300', 'x-fake-events: 30']),
      (t) => t.includes('\n\n', t.indexOf('\r\n\r\n') + 4), // headers and a first event
    );
    const closes = fake.socketsClosed.length;
    const leftAt = Date.now();
    socket.destroy();
    const closedAt = await nextCloseAfter(fake, closes);
    expect(closedAt - leftAt).toBeLessThan(100);
    await sleep(50);
    expect(fake.requests[before]!.aborted).toBe(true);
    expect(fake.requests[before]!.response?.outcome).toBe('aborted');
  });

  it('closes the upstream socket within 100 ms when the caller leaves before the first byte', async () => {
    const fake = fakeOf(provider);
    const before = fake.requests.length;
    const socket = connect(h.kr.port, '127.0.0.1');
    socket.on('error', () => undefined);
    socket.write(streamRequest(provider, ['x-fake-first-byte-delay-ms: 5000']));
    await fake.waitForRequests(before + 1);
    await sleep(100); // keyrelay is now waiting for upstream's status line
    const closes = fake.socketsClosed.length;
    const leftAt = Date.now();
    socket.destroy();
    const closedAt = await nextCloseAfter(fake, closes);
    expect(closedAt - leftAt).toBeLessThan(100);
    await sleep(50);
    expect(fake.requests[before]!.aborted).toBe(true);
    expect(fake.requests[before]!.response?.outcome).toBe('aborted'); // it never got to answer
  });
});

describe.each(['openai', 'anthropic'] as const)('%s: upstream fails mid-stream', (provider) => {
  it('ends the caller’s response without a terminating chunk when upstream drops after 3 events', async () => {
    const res = await rawExchange(h.kr.port, streamRequest(provider, ['x-fake-drop-after-events: 3']));
    expect(res.status).toBe(200);
    expect(res.complete).toBe(false);
    expect(res.body.toString().split('\n\n').length - 1).toBe(3);
  });

  it('logs a stream upstream drops as dropped mid-response (not unreachable), with the client IP', async () => {
    const res = await rawExchange(h.kr.port, streamRequest(provider, ['x-fake-drop-after-events: 3']));
    expect(res.status).toBe(200);
    const id = res.headers['x-keyrelay-request-id']?.[0];
    expect(id).toBeTruthy();
    await h.flushLog();
    const row = await h.kr.services.logStore.getRequest(accountId, id!);
    expect(row).toMatchObject({
      status: 200,
      outcome: 'upstream_error',
      error_code: 'proxy_upstream_dropped',
      client_ip: '127.0.0.1',
    });
    expect(row!.error_message).toContain('closed the connection mid-response');
  });

  it('hands the caller upstream’s response head before the first event, even if the stream then stalls', async () => {
    const res = await rawExchange(
      h.kr.port,
      streamRequest(provider, ['x-fake-stall-after-events: 0']),
      10_000,
    );
    expect(res.status).toBe(200);
    expect(res.headers['content-type']?.[0]).toContain('text/event-stream');
    expect(res.complete).toBe(false);
    // At once, not with the cut the idle timeout (400 ms) makes: a head held for a first event that never
    // comes would arrive only then.
    const socket = await openUntil(streamRequest(provider, ['x-fake-stall-after-events: 0']), (t) =>
      t.includes('\r\n\r\n'),
    );
    const headAt = Date.now();
    await new Promise((resolve) => socket.once('close', resolve));
    expect(Date.now() - headAt).toBeGreaterThan(200);
  });

  it('makes an HTTP client raise an error (not a clean end) when upstream drops', async () => {
    const res = await request(`${h.url}/api/proxy/${provider}${PATHS[provider]}`, {
      method: 'POST',
      headers: { 'proxy-api-key': key, 'content-type': 'application/json', 'x-fake-drop-after-events': '2' },
      body: JSON.stringify({ model: 'm', max_tokens: 5, messages: [], stream: true }),
    });
    expect(res.statusCode).toBe(200);
    await expect(res.body.text()).rejects.toThrow();
  });

  it('ends the caller’s response abnormally when upstream stalls longer than the idle timeout', async () => {
    const started = Date.now();
    const res = await rawExchange(
      h.kr.port,
      streamRequest(provider, ['x-fake-stall-after-events: 2']),
      10_000,
    );
    expect(res.status).toBe(200);
    expect(res.complete).toBe(false);
    expect(res.body.toString().split('\n\n').length - 1).toBe(2);
    expect(Date.now() - started).toBeLessThan(8000); // cut by keyrelay's idle timeout, not by our client
  });
});

describe('upstream drops a non-streamed response', () => {
  it('leaves the caller short of the declared content-length instead of ending cleanly', async () => {
    const body = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'x' }] });
    const res = await rawExchange(h.kr.port, streamRequest('openai', ['x-fake-drop-after-events: 0'], body));
    expect(res.status).toBe(200);
    expect(Number(res.headers['content-length']?.[0])).toBeGreaterThan(0);
    expect(res.complete).toBe(false);
  });
});

describe('caller disconnects while still sending its body', () => {
  it('never contacts the upstream', async () => {
    const before = h.openai.requests.length;
    const socket = connect(h.kr.port, '127.0.0.1');
    socket.on('error', () => undefined);
    socket.write(
      rawHead('POST /api/proxy/openai/v1/embeddings HTTP/1.1', [
        'Host: keyrelay.test',
        `proxy-api-key: ${key}`,
        'Content-Length: 5000',
      ]) + '{"input":"',
    );
    await sleep(200);
    socket.destroy();
    await sleep(300);
    expect(h.openai.requests.length).toBe(before);
  });
});

describe('while keyrelay strips the usage it asked for (OpenAI stream without include_usage)', () => {
  const body = JSON.stringify({
    model: 'gpt-4o-mini',
    messages: [{ role: 'user', content: 'x' }],
    stream: true,
  });

  it.each([
    ['drops', 'x-fake-drop-after-events: 3'],
    ['stalls past the idle timeout', 'x-fake-stall-after-events: 3'],
    ['drops a gzip stream', 'x-fake-drop-after-events: 3\r\nx-fake-encoding: gzip'],
  ])('ends the caller’s response abnormally when upstream %s', async (_name, line) => {
    const res = await rawExchange(h.kr.port, streamRequest('openai', [line], body), 10_000);
    expect(res.status).toBe(200);
    expect(res.complete).toBe(false);
  });

  it('closes the upstream socket within 100 ms when the caller leaves mid-stream', async () => {
    const socket = await openUntil(
      streamRequest('openai', ['x-fake-event-delay-ms: 300', 'x-fake-events: 30'], body),
      (t) => t.includes('\n\n', t.indexOf('\r\n\r\n') + 4),
    );
    const closes = h.openai.socketsClosed.length;
    const leftAt = Date.now();
    socket.destroy();
    expect((await nextCloseAfter(h.openai, closes)) - leftAt).toBeLessThan(100);
  });
});

describe.each(['openai', 'anthropic'] as const)('%s: upstream redirect', (provider) => {
  it('passes a 307 back with its location and does not follow it', async () => {
    const location = `${decoy.url}/v1/messages?stolen=1`;
    const res = await rawExchange(h.kr.port, streamRequest(provider, [`x-fake-redirect: ${location}`]));
    expect(res.status).toBe(307);
    expect(res.headers.location).toEqual([location]);
    expect(res.headers['x-keyrelay-request-id']).toHaveLength(1);
    await sleep(100);
    expect(decoy.connections).toBe(0);
  });
});
