/**
 * Responses stream back with backpressure. A caller that stops reading a large stream must stall
 * the upstream's writes instead of making keyrelay buffer the body; once it reads again, every byte arrives.
 * Also for a chat stream keyrelay asked usage for, whose events go through the usage stripper on the way.
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256, sseResponse, startFakeOpenAI, type FakeUpstream } from './fakes/index.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';
import { rawHead } from './helpers/raw-http.js';

const PIECE = 1024 * 1024;
const PIECES = 48;
const TOTAL = PIECE * PIECES;

let h: Harness;
let big: FakeUpstream;
let key: string;

beforeAll(async () => {
  // One SSE event per MiB: the body is large, the recording (and expected hash) stays cheap.
  const piece = (i: number) => `data: ${String(i).padStart(8, '0')}${'x'.repeat(PIECE - 16)}\n\n`;
  const pieces = Array.from({ length: PIECES }, (_, i) => piece(i));
  big = await startFakeOpenAI({ respond: () => sseResponse({}, pieces) });
  h = await startHarness({ KEYRELAY_OPENAI_UPSTREAM: big.url });
  ({ key } = await h.newUser());
});
afterAll(async () => {
  await h.close();
  await big.close();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const CHAT = JSON.stringify({
  model: 'gpt-4o-mini',
  stream: true,
  messages: [{ role: 'user', content: 'hi' }],
});

describe('slow reader', () => {
  it.each([
    ['a plain body', 'GET /api/proxy/openai/v1/big HTTP/1.1', ''],
    ['a chat stream through the usage stripper', 'POST /api/proxy/openai/v1/chat/completions HTTP/1.1', CHAT],
  ])(
    'stalls the upstream instead of buffering %s, and delivers every byte once reading resumes',
    async (_name, line, sent) => {
      const before = big.requests.length;
      const socket = connect(h.kr.port, '127.0.0.1');
      socket.setNoDelay(true);
      const received: Buffer[] = [];
      let receivedBytes = 0;
      const onData = (b: Buffer) => {
        received.push(b);
        receivedBytes += b.length;
      };
      socket.on('data', onData);
      const ended = new Promise<void>((resolve) => socket.on('end', () => resolve()));
      const length = sent ? [`Content-Length: ${sent.length}`, 'Content-Type: application/json'] : [];
      socket.write(
        rawHead(line, ['Host: keyrelay.test', `proxy-api-key: ${key}`, 'Connection: close', ...length]) +
          sent,
      );
      await big.waitForRequests(before + 1, 10_000);
      const rec = big.requests[before]!;
      // Read the first bytes, then stop reading altogether.
      while (receivedBytes === 0) await sleep(5);
      socket.pause();

      // Give the upstream ample time to push everything it can; then sample twice to see that it stopped.
      await sleep(1500);
      const first = rec.response?.body.length ?? 0;
      await sleep(1000);
      const second = rec.response?.body.length ?? 0;
      expect(rec.response?.outcome).toBeUndefined(); // upstream has not been able to finish
      expect(second).toBeLessThan(TOTAL / 2);
      expect(second - first).toBeLessThan(TOTAL / 8);

      socket.resume();
      await ended;
      const raw = Buffer.concat(received);
      const bodyStart = raw.indexOf('\r\n\r\n') + 4;
      // Connection: close + no content-length → chunked; undo the framing to compare the payload.
      const body = dechunk(raw.subarray(bodyStart));
      expect(rec.response?.outcome).toBe('complete');
      // The stream went through the usage stripper: keyrelay had asked for usage.
      if (sent) expect(rec.body.toString()).toContain('"include_usage":true');
      expect(body.length).toBe(TOTAL);
      expect(sha256(body)).toBe(sha256(rec.response!.body));
    },
    60_000,
  );
});

function dechunk(buf: Buffer): Buffer {
  const parts: Buffer[] = [];
  let pos = 0;
  for (;;) {
    const eol = buf.indexOf('\r\n', pos);
    const size = Number.parseInt(buf.subarray(pos, eol).toString('latin1'), 16);
    if (!size) return Buffer.concat(parts);
    parts.push(buf.subarray(eol + 2, eol + 2 + size));
    pos = eol + 2 + size + 2;
  }
}
