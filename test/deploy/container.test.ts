/**
 * The container image, built and run as an operator would: keyrelay's Containerfile on a locally made Node
 * base, started with a data volume on a free port, a sign-up through the console API, calls through it with
 * the official SDKs against fake upstreams on 127.0.0.1, a stream in flight when SIGTERM arrives, and every
 * answered call's row found afterwards in the volume's SQLite.
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqliteLogStore } from '../../src/store/sqlite/log-store.js';
import { Client } from '../console-harness.js';
import { START_ENV, START_FLAGS } from '../helpers/process.js';
import { startFakeAnthropic, startFakeOpenAI, type FakeUpstream } from '../fakes/index.js';
import { IMAGE, ULIMITS, buildImage, freePort, podman, sleep } from './podman.js';
import { callBoth } from './sdk-calls.js';

const name = `keyrelay-test-${randomBytes(4).toString('hex')}`;
const volume = `${name}-data`;
let openai: FakeUpstream;
let anthropic: FakeUpstream;
let built: { base: string; seconds: number };

beforeAll(async () => {
  built = await buildImage();
  openai = await startFakeOpenAI();
  anthropic = await startFakeAnthropic();
  await podman(['volume', 'create', volume]);
}, 1_800_000);

afterAll(async () => {
  await podman(['rm', '--force', '--ignore', name]).catch(() => undefined);
  await podman(['volume', 'rm', '--force', volume]).catch(() => undefined);
  await openai?.close();
  await anthropic?.close();
});

async function waitReady(base: string): Promise<void> {
  let last = '';
  for (let i = 0; i < 300; i++) {
    try {
      const res = await request(`${base}/readyz`);
      await res.body.text();
      if (res.statusCode === 200) return;
      last = String(res.statusCode);
    } catch (err) {
      last = (err as Error).message;
    }
    await sleep(200);
  }
  const logs = await podman(['logs', name]).catch((e: Error) => e.message);
  throw new Error(`the container did not become ready (${last}):\n${logs.slice(-4000)}`);
}

describe('container image', () => {
  it('runs as a non-root user with production dependencies only', async () => {
    console.log(`image built on ${built.base} in ${built.seconds.toFixed(0)} s`);
    const inspect = JSON.parse(await podman(['image', 'inspect', IMAGE])) as {
      Size: number;
      Config: { User: string; Volumes: Record<string, unknown>; Env: string[]; Cmd: string[] };
      Healthcheck?: { Test: string[] };
    }[];
    const image = inspect[0]!;
    console.log(`image size ${(image.Size / 1e6).toFixed(0)} MB`);
    expect(image.Config.User).toBe('keyrelay');
    expect(Object.keys(image.Config.Volumes)).toEqual(['/data']);
    expect(image.Healthcheck?.Test.join(' ')).toMatch(/healthz/);
    // keyrelay runs as `npm start` runs it: its variables and node flags.
    for (const [variable, value] of Object.entries(START_ENV))
      expect(image.Config.Env).toContain(`${variable}=${value}`);
    expect(image.Config.Cmd).toEqual(['node', ...START_FLAGS, 'bin/keyrelay.js', 'serve']);
    const listing = await podman([
      'run',
      '--rm',
      '--network=host',
      ...ULIMITS,
      IMAGE,
      'sh',
      '-c',
      'id -u; ls node_modules; ls dist/src/cli/main.js web/dist/index.html',
    ]);
    const [uid, ...rest] = listing.split('\n');
    expect(Number(uid)).not.toBe(0);
    for (const dev of ['typescript', 'vitest', 'vite', 'openai', 'react', 'eslint'])
      expect(rest).not.toContain(dev);
    for (const dep of ['fastify', 'undici', 'pg']) expect(rest).toContain(dep);
  }, 120_000);

  it('serves the console and the proxy, drains on SIGTERM, and every call has its row in the volume', async () => {
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    await podman([
      'run',
      '--detach',
      '--name',
      name,
      '--network=host',
      ...ULIMITS,
      '--volume',
      `${volume}:/data`,
      '--env',
      `KEYRELAY_PORT=${port}`,
      '--env',
      `KEYRELAY_OPENAI_UPSTREAM=${openai.url}`,
      '--env',
      `KEYRELAY_ANTHROPIC_UPSTREAM=${anthropic.url}`,
      '--env',
      'KEYRELAY_DRAIN_TIMEOUT_MS=20000',
      IMAGE,
    ]);
    await waitReady(base);
    // The image's HEALTHCHECK, run as the runtime runs it.
    await podman(['healthcheck', 'run', name]);

    const page = await request(`${base}/`);
    expect(page.statusCode).toBe(200);
    expect(await page.body.text()).toMatch(/<div id="root">/);

    const login = await new Client(base).signup('container@example.com');
    const key = (login.json as { key: { key: string } }).key.key;
    expect(key).toBeTruthy();

    const oa = new OpenAI({
      apiKey: 'sk-test-canary-openai',
      baseURL: `${base}/api/proxy/openai/v1`,
      maxRetries: 0,
      defaultHeaders: { 'proxy-api-key': key },
    });
    const an = new Anthropic({
      apiKey: 'sk-ant-canary',
      baseURL: `${base}/api/proxy/anthropic`,
      maxRetries: 0,
      defaultHeaders: { 'proxy-api-key': key },
    });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(...(await callBoth(oa, an, `hi ${i}`)));

    // A stream in flight when SIGTERM arrives: 10 events, 300 ms apart; it must finish whole.
    const stream = await oa.chat.completions
      .create(
        { model: 'gpt-4o', stream: true, messages: [{ role: 'user', content: 'slow' }] },
        { headers: { 'x-fake-events': '10', 'x-fake-event-delay-ms': '300' } },
      )
      .withResponse();
    ids.push(stream.response.headers.get('x-keyrelay-request-id')!);
    const chunks: string[] = [];
    let signalled = false;
    for await (const chunk of stream.data) {
      chunks.push(chunk.choices[0]?.delta.content ?? '');
      if (!signalled) {
        signalled = true;
        await podman(['kill', '--signal', 'TERM', name]);
        // Draining: not ready any more, still alive.
        const ready = await request(`${base}/readyz`).catch(() => null);
        if (ready) {
          await ready.body.text();
          expect(ready.statusCode).toBe(503);
        }
      }
    }
    expect(chunks.join('').length).toBeGreaterThan(0);
    expect(chunks.filter((c) => c !== '').length).toBe(10);

    const exitCode = await podman(['wait', name], 60_000);
    expect(exitCode, await podman(['logs', name])).toBe('0');
    expect(ids.every((id) => /\S/.test(id))).toBe(true);

    const mount = await podman(['volume', 'inspect', '--format', '{{.Mountpoint}}', volume]);
    const log = new SqliteLogStore(join(mount, 'requests.db'));
    try {
      const rows = await log.listRecent({ limit: 1_000 });
      expect(rows.map((r) => r.id).sort()).toEqual([...ids].sort());
      const streamed = rows.find((r) => r.id === ids.at(-1));
      expect(streamed?.status).toBe(200);
    } finally {
      await log.close();
    }
  }, 300_000);
});
