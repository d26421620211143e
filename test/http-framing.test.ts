/**
 * On raw sockets: HTTP/1.0 with Transfer-Encoding is refused and the
 * connection closed (RFC 9112 §6.1); more than 100 header lines (MAX_HEADERS, src/http-guard.ts) is 431, never silently
 * trimmed; and nothing pipelined behind an answer that closes the connection is processed.
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from './helpers/keyrelay.js';
import { rawExchange, rawHead } from './helpers/raw-http.js';

let h: Harness;
let key: string;

beforeAll(async () => {
  h = await startHarness();
  ({ key } = await h.newUser());
});
afterAll(() => h.close());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const PATH = '/api/proxy/openai/v1/chat/completions';

function chat(marker: string): string {
  return JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: marker }] });
}

/** A complete proxied request whose body carries `marker`, so the upstream's record can be searched. */
function validRequest(marker: string, version = '1.1'): string {
  const body = chat(marker);
  return (
    rawHead(`POST ${PATH} HTTP/${version}`, [
      'Host: x',
      `proxy-api-key: ${key}`,
      'content-type: application/json',
      `content-length: ${Buffer.byteLength(body)}`,
    ]) + body
  );
}

const reachedUpstream = (marker: string) =>
  h.openai.requests.some((r) => r.body.toString('utf8').includes(marker));

interface Conversation {
  /** Everything the server sent until it closed the connection. */
  received: string;
  closed: boolean;
}

/** Writes `parts` (one every `gapMs`), then collects what comes back until close or `waitMs`. */
function converse(parts: string[], gapMs = 0, waitMs = 3_000): Promise<Conversation> {
  return new Promise((resolve) => {
    const socket = connect(h.kr.port, '127.0.0.1');
    let received = '';
    let closed = false;
    socket.on('data', (d: Buffer) => (received += d.toString('latin1')));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      closed = true;
      clearTimeout(timer);
      resolve({ received, closed });
    });
    const timer = setTimeout(() => {
      socket.destroy();
      resolve({ received, closed });
    }, waitMs);
    void (async () => {
      for (const part of parts) {
        if (socket.destroyed) return;
        socket.write(part);
        if (gapMs) await sleep(gapMs);
      }
    })();
  });
}

const statuses = (text: string) => [...text.matchAll(/HTTP\/1\.[01] (\d{3}) /g)].map((m) => Number(m[1]));

describe('HTTP/1.0 with Transfer-Encoding', () => {
  it('is answered 400 and closed; a request behind it never reaches upstream', async () => {
    const marker = `after-te-${Date.now()}`;
    const first =
      rawHead(`POST ${PATH} HTTP/1.0`, [
        'Host: x',
        `proxy-api-key: ${key}`,
        'content-type: application/json',
        'Connection: keep-alive',
        'Transfer-Encoding: chunked',
      ]) + `${chat('te').length.toString(16)}\r\n${chat('te')}\r\n0\r\n\r\n`;
    const second = validRequest(marker, '1.0').replace('Host: x', 'Host: x\r\nConnection: keep-alive');
    const res = await converse([first + second]);
    expect(statuses(res.received)).toEqual([400]);
    expect(res.received.toLowerCase()).toContain('connection: close');
    expect(res.closed).toBe(true);
    await sleep(300);
    expect(reachedUpstream(marker)).toBe(false);
    expect(reachedUpstream('"te"')).toBe(false);
  });

  it('HTTP/1.0 without it still works', async () => {
    const res = await rawExchange(h.kr.port, validRequest(`plain-10-${Date.now()}`, '1.0'));
    expect(res.status).toBe(200);
  });
});

describe('header count', () => {
  const withHeaders = (n: number, extra: string[] = []) =>
    rawHead('GET /healthz HTTP/1.1', [
      'Host: x',
      ...Array.from({ length: n - 1 - extra.length }, (_, i) => `x-h${i}: 1`),
      ...extra,
    ]);

  it('accepts 100 header lines', async () => {
    expect((await rawExchange(h.kr.port, withHeaders(100))).status).toBe(200);
  });

  it('answers 431 to 101, and to 2,100 with a second proxy-api-key at the end', async () => {
    const res = await rawExchange(h.kr.port, withHeaders(101));
    expect(res.status).toBe(431);
    expect(res.headers.connection).toEqual(['close']);
    const marker = `many-headers-${Date.now()}`;
    const body = chat(marker);
    const many =
      rawHead(`POST ${PATH} HTTP/1.1`, [
        'Host: x',
        `proxy-api-key: ${key}`,
        'content-type: application/json',
        `content-length: ${Buffer.byteLength(body)}`,
        ...Array.from({ length: 2_100 }, (_, i) => `a${i % 10}: 1`),
        'proxy-api-key: kr_someone_elses_key',
      ]) + body;
    const refused = await rawExchange(h.kr.port, many);
    expect(refused.status).toBe(431);
    await sleep(300);
    expect(reachedUpstream(marker)).toBe(false);
  });
});

describe('pipelining behind a closing refusal', () => {
  it('drops a request pipelined behind a 401 that closes the connection', async () => {
    const marker = `behind-401-${Date.now()}`;
    // Both in one write: Node parses the second while the first is still being refused.
    const refused = rawHead(`POST ${PATH} HTTP/1.1`, [
      'Host: x',
      'proxy-api-key: kr_not_a_real_key',
      'content-type: application/json',
      'content-length: 5',
      'Connection: close',
    ]);
    const res = await converse([refused + 'hello' + validRequest(marker)]);
    expect(statuses(res.received)).toEqual([401]);
    expect(res.received.toLowerCase()).toContain('connection: close');
    await sleep(300);
    expect(reachedUpstream(marker)).toBe(false);
  });

  it('drops a request pipelined behind a refusal sent before the body was in', async () => {
    const marker = `behind-413-${Date.now()}`;
    // The refusal (body too large, by its declared length) says close; the rest arrives afterwards.
    const head = rawHead(`POST ${PATH} HTTP/1.1`, [
      'Host: x',
      `proxy-api-key: ${key}`,
      'content-type: application/json',
      `content-length: ${64 * 1024 * 1024}`,
    ]);
    const res = await converse([head, 'x'.repeat(1000) + validRequest(marker)], 300);
    expect(statuses(res.received)).toEqual([413]);
    await sleep(300);
    expect(reachedUpstream(marker)).toBe(false);
  });

  it('drops a request pipelined behind a 404 for an unknown provider', async () => {
    for (let round = 0; round < 3; round++) {
      const marker = `behind-404-${Date.now()}-${round}`;
      const body = chat('unknown');
      const unknown =
        rawHead('POST /api/proxy/nosuchprovider/v1/chat/completions HTTP/1.1', [
          'Host: x',
          `proxy-api-key: ${key}`,
          'content-type: application/json',
          `content-length: ${Buffer.byteLength(body)}`,
        ]) + body;
      const res = await converse([unknown + validRequest(marker)]);
      expect(statuses(res.received)).toEqual([404]);
      expect(res.closed).toBe(true);
      await sleep(300);
      expect(reachedUpstream(marker)).toBe(false);
    }
  });

  it('drops a request pipelined behind HTTP/1.0 + Transfer-Encoding with an empty chunked body', async () => {
    for (let round = 0; round < 3; round++) {
      const marker = `behind-te-empty-${Date.now()}-${round}`;
      const first =
        rawHead(`POST ${PATH} HTTP/1.0`, [
          'Host: x',
          `proxy-api-key: ${key}`,
          'content-type: application/json',
          'Connection: keep-alive',
          'Transfer-Encoding: chunked',
        ]) + '0\r\n\r\n';
      const res = await converse([first + validRequest(marker)]);
      expect(statuses(res.received)).toEqual([400]);
      expect(res.closed).toBe(true);
      await sleep(300);
      expect(reachedUpstream(marker)).toBe(false);
    }
  });

  it('still answers ordinary pipelined requests, in order', async () => {
    const a = `pipe-a-${Date.now()}`;
    const b = `pipe-b-${Date.now()}`;
    const res = await converse([validRequest(a) + validRequest(b)], 0, 2_000);
    expect(statuses(res.received)).toEqual([200, 200]);
    const ia = h.openai.requests.findIndex((r) => r.body.toString('utf8').includes(a));
    const ib = h.openai.requests.findIndex((r) => r.body.toString('utf8').includes(b));
    expect(ia).toBeGreaterThanOrEqual(0);
    expect(ib).toBeGreaterThan(ia);
  });
});

describe('bytes that are not HTTP', () => {
  it('are answered 400 in keyrelay’s error shape, and the connection closed', async () => {
    const res = await converse(['NOT HTTP AT ALL\r\n\r\n']);
    expect(statuses(res.received)).toEqual([400]);
    expect(res.received).toContain('"type":"keyrelay_error"');
    expect(res.received.toLowerCase()).toContain('connection: close');
    expect(res.closed).toBe(true);
  });

  it('arriving while a stream is answered, cut the connection without writing into the stream', async () => {
    const body = JSON.stringify({
      model: 'gpt-4o',
      stream: true,
      messages: [{ role: 'user', content: 'hi' }],
    });
    const streaming =
      rawHead(`POST ${PATH} HTTP/1.1`, [
        'Host: x',
        `proxy-api-key: ${key}`,
        'content-type: application/json',
        'x-fake-events: 20',
        'x-fake-event-delay-ms: 50',
        `content-length: ${Buffer.byteLength(body)}`,
      ]) + body;
    // The garbage follows once the stream's first events are out.
    const res = await converse([streaming, 'NOT HTTP AT ALL\r\n\r\n'], 400);
    expect(statuses(res.received)).toEqual([200]);
    expect(res.received).toContain('data: ');
    expect(res.received).not.toContain('keyrelay_error');
    expect(res.closed).toBe(true);
  });
});
