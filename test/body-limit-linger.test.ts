/**
 * A body over KEYRELAY_MAX_BODY_BYTES, declared by its Content-Length, is refused 413 before it is read;
 * the refusal must reach a client that is still writing. keyrelay closes such a connection as nginx's
 * lingering close does: the answer (saying `connection: close`), the rest of the body read and thrown away
 * (for a bounded time and size), then the socket. Without that the kernel resets the connection over the
 * unread bytes and the client sees EPIPE / ECONNRESET instead of the 413.
 */
import Anthropic from '@anthropic-ai/sdk';
import { Agent, request } from 'node:http';
import { connect, type Socket } from 'node:net';
import OpenAI from 'openai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeAnthropic, startFakeOpenAI, type FakeUpstream } from './fakes/index.js';
import {
  createUserWithKey,
  startServeProcess,
  stopServeProcess,
  type ServeProcess,
} from './helpers/process.js';
import { rawHead } from './helpers/raw-http.js';

const MiB = 1024 * 1024;
const ATTEMPTS = 20;

let kr: ServeProcess;
let port: number;
let key: string;
let dataDir: string;
let fakes: FakeUpstream[];

// keyrelay in its own process, as deployed: the client's writes and keyrelay's close race for real.
beforeAll(async () => {
  fakes = [await startFakeOpenAI(), await startFakeAnthropic()];
  dataDir = mkdtempSync(join(tmpdir(), 'keyrelay-linger-'));
  const env = {
    KEYRELAY_DATA_DIR: dataDir,
    KEYRELAY_MAX_BODY_BYTES: String(MiB),
    KEYRELAY_OPENAI_UPSTREAM: fakes[0]!.url,
    KEYRELAY_ANTHROPIC_UPSTREAM: fakes[1]!.url,
  };
  ({ key } = await createUserWithKey('linger@example.com', env));
  kr = await startServeProcess(env);
  port = Number(new URL(kr.url).port);
}, 60_000);
afterAll(async () => {
  await stopServeProcess(kr);
  for (const f of fakes) await f.close();
  rmSync(dataDir, { recursive: true, force: true });
});

const padding = 'x'.repeat(2 * MiB);

/** What each attempt ended in: the status of the SDK's API error, or the name of any other error. */
async function outcomes(attempt: () => Promise<unknown>): Promise<string[]> {
  const seen: string[] = [];
  for (let i = 0; i < ATTEMPTS; i++) {
    try {
      await attempt();
      seen.push('ok');
    } catch (err) {
      const status = (err as { status?: unknown }).status;
      seen.push(typeof status === 'number' ? String(status) : (err as Error).constructor.name);
    }
  }
  return seen;
}

describe('a 2 MiB body against a 1 MiB limit, from the official SDKs', () => {
  it('OpenAI: every attempt ends in the SDK’s 413 error', async () => {
    const client = new OpenAI({
      apiKey: 'sk-test',
      baseURL: `${kr.url}/api/proxy/openai/v1`,
      maxRetries: 0,
      defaultHeaders: { 'proxy-api-key': key },
    });
    const seen = await outcomes(() =>
      client.chat.completions.create({
        model: 'gpt-4o-mini',
        messages: [{ role: 'user', content: padding }],
      }),
    );
    expect(seen).toEqual(Array(ATTEMPTS).fill('413'));
  }, 120_000);

  it('Anthropic: every attempt ends in the SDK’s 413 error', async () => {
    const client = new Anthropic({
      apiKey: 'sk-ant-test',
      baseURL: `${kr.url}/api/proxy/anthropic`,
      maxRetries: 0,
      defaultHeaders: { 'proxy-api-key': key },
    });
    const seen = await outcomes(() =>
      client.messages.create({
        model: 'claude-sonnet-4-6',
        max_tokens: 10,
        messages: [{ role: 'user', content: padding }],
      }),
    );
    expect(seen).toEqual(Array(ATTEMPTS).fill('413'));
  }, 120_000);
});

interface Writer {
  /** Everything received, as latin1. */
  received: string;
  /** When keyrelay closed its side (FIN), ms after the first byte was written. */
  endedAt: number | null;
  /** When the socket was gone (closed or reset), ms after the first byte was written. */
  closedAt: number;
  /** Bytes written before the socket was gone. */
  written: number;
  /** A write or read error (EPIPE, ECONNRESET), if any. */
  error: string | null;
}

/** Sends `head`, then writes 64 KiB pieces as fast as the socket takes them, for up to `maxBytes`. */
function keepWriting(head: string, maxBytes: number, piece: (n: number) => Buffer): Promise<Writer> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    const started = Date.now();
    const w: Writer = { received: '', endedAt: null, closedAt: 0, written: 0, error: null };
    socket.on('data', (d: Buffer) => (w.received += d.toString('latin1')));
    socket.on('end', () => (w.endedAt = Date.now() - started));
    socket.on('error', (err: NodeJS.ErrnoException) => (w.error = err.code ?? err.message));
    socket.on('close', () => {
      w.closedAt = Date.now() - started;
      resolve(w);
    });
    socket.write(head);
    const pump = () => {
      while (!socket.destroyed && w.written < maxBytes) {
        const buf = piece(w.written);
        w.written += buf.length;
        if (!socket.write(buf)) return void socket.once('drain', pump);
      }
      if (!socket.destroyed) socket.end();
    };
    pump();
  });
}

const PATH = '/api/proxy/openai/v1/chat/completions';

describe('a keep-alive client', () => {
  it('sends its next request on a new connection after the 413, and every one is answered', async () => {
    // Node's keep-alive agent reuses a connection the moment an answer that did not say `close` is over:
    // a 413 that said keep-alive and was then closed under it lost the next request to a reset.
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const post = (body: string) =>
      new Promise<number>((resolve, reject) => {
        const req = request(
          {
            agent,
            host: '127.0.0.1',
            port,
            method: 'POST',
            path: PATH,
            headers: {
              'proxy-api-key': key,
              'content-type': 'application/json',
              'content-length': body.length,
            },
          },
          (res) => {
            res.resume();
            res.once('end', () => resolve(res.statusCode!));
          },
        );
        req.once('error', reject);
        req.end(body);
      });
    const small = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] });
    const body = 'x'.repeat(MiB + 1);
    try {
      for (let i = 0; i < 10; i++) {
        expect(await post(body)).toBe(413);
        expect(await post(small)).toBe(200);
      }
    } finally {
      agent.destroy();
    }
  }, 60_000);
});

describe('a raw client that keeps writing', () => {
  it('gets the 413 while writing, and the connection is closed cleanly once the body is in', async () => {
    // More than the kernel's buffers on both ends take: the client is still writing when the 413 is out.
    const length = 32 * MiB;
    const head = rawHead(`POST ${PATH} HTTP/1.1`, [
      'Host: x',
      `proxy-api-key: ${key}`,
      'content-type: application/json',
      `content-length: ${length}`,
    ]);
    const w = await keepWriting(head, length, () => Buffer.alloc(64 * 1024, 'x'));
    expect(w.received).toMatch(/^HTTP\/1\.1 413 /);
    expect(w.received).toContain('proxy_body_too_large');
    // The answer says what happens next: a client is never told to reuse a connection that is closing.
    expect(w.received).toMatch(/\r\nconnection: close\r\n/i);
    expect(w.received).not.toMatch(/keep-alive/i);
    expect(w.endedAt).not.toBeNull();
    expect(w.error).toBeNull(); // nothing was reset under it
    expect(w.written).toBe(length);
  }, 30_000);

  it('is cut after the bounded linger when it writes forever', async () => {
    const head = rawHead(`POST ${PATH} HTTP/1.1`, [
      'Host: x',
      `proxy-api-key: ${key}`,
      'content-type: application/json',
      'transfer-encoding: chunked',
    ]);
    const chunk = Buffer.from(`10000\r\n${'x'.repeat(0x10000)}\r\n`);
    // Far more than the linger lets through (64 MiB); paced, so the time bound is what cuts it.
    const w = await new Promise<Writer>((resolve) => {
      const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
      const started = Date.now();
      const r: Writer = { received: '', endedAt: null, closedAt: 0, written: 0, error: null };
      socket.on('data', (d: Buffer) => (r.received += d.toString('latin1')));
      socket.on('end', () => (r.endedAt = Date.now() - started));
      socket.on('error', () => undefined);
      const timer = setInterval(() => {
        if (socket.destroyed) return;
        r.written += chunk.length;
        socket.write(chunk);
      }, 20);
      socket.on('close', () => {
        clearInterval(timer);
        r.closedAt = Date.now() - started;
        resolve(r);
      });
      socket.write(head);
    });
    expect(w.received).toMatch(/^HTTP\/1\.1 413 /);
    // The linger is 10 s; generous for a shared machine, and far from "forever".
    expect(w.closedAt).toBeLessThan(30_000);
  }, 60_000);
});

/** Sends `head` alone and collects what comes back until `until` matches it; the socket is left open. */
function headFirst(head: string, until: RegExp): Promise<{ received: string; socket: Socket }> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1' });
    let received = '';
    const timer = setTimeout(() => reject(new Error(`no ${until} in ${JSON.stringify(received)}`)), 5_000);
    socket.on('data', (d: Buffer) => {
      received += d.toString('latin1');
      if (until.test(received)) {
        clearTimeout(timer);
        resolve({ received, socket });
      }
    });
    socket.on('error', () => undefined);
    socket.write(head);
  });
}

describe('a client that sends Expect: 100-continue', () => {
  const expectHead = (path: string, headers: string[]) =>
    rawHead(`POST ${path} HTTP/1.1`, [
      'Host: x',
      'content-type: application/json',
      'Expect: 100-continue',
      ...headers,
    ]);

  it('is refused 413 by its declared length before it is told to send the body', async () => {
    const head = expectHead(PATH, [`proxy-api-key: ${key}`, `content-length: ${2 * MiB}`]);
    const { received, socket } = await headFirst(head, /proxy_body_too_large/);
    expect(received).toMatch(/^HTTP\/1\.1 413 /);
    expect(received).not.toContain('100 Continue');
    expect(received).toMatch(/\r\nconnection: close\r\n/i);
    socket.destroy();
  });

  it('is refused 401 for a bad key before it is told to send the body', async () => {
    const head = expectHead(PATH, ['proxy-api-key: kr_not_a_real_key', 'content-length: 100']);
    const { received, socket } = await headFirst(head, /"code":"proxy_key_invalid"|authentication_error/);
    expect(received).toMatch(/^HTTP\/1\.1 401 /);
    expect(received).not.toContain('100 Continue');
    socket.destroy();
  });

  it('is told to continue once its key and length are accepted, and its call goes through', async () => {
    const body = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] });
    const head = expectHead(PATH, [`proxy-api-key: ${key}`, `content-length: ${Buffer.byteLength(body)}`]);
    const { received, socket } = await headFirst(head, /^HTTP\/1\.1 100 Continue\r\n\r\n/);
    const answer = await new Promise<string>((resolve) => {
      let rest = received.slice(received.indexOf('\r\n\r\n') + 4);
      socket.on('data', (d: Buffer) => {
        rest += d.toString('latin1');
        if (/"choices"/.test(rest)) resolve(rest);
      });
      socket.write(body);
    });
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    socket.destroy();
  });

  it('is told to continue at once by the console, which reads bodies itself', async () => {
    const body = JSON.stringify({ email: 'linger@example.com', password: 'wrong' });
    const head = expectHead('/api/console/login', [`content-length: ${Buffer.byteLength(body)}`]);
    const { socket } = await headFirst(head, /^HTTP\/1\.1 100 Continue\r\n\r\n/);
    socket.destroy();
  });
});
