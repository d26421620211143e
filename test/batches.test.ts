/**
 * Batches on both providers through the official SDKs (issue #13, point 2): the batch is recorded against
 * the key, its results are priced per succeeded line at the batch rate and counted once however often they
 * are downloaded, Anthropic's results_url is rewritten to keyrelay, and large results stream through in
 * bounded memory. Expected costs are computed here from the fakes' numbers with the price library.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import Anthropic from '@anthropic-ai/sdk';
import { calcPrice } from '@pydantic/genai-prices';
import OpenAI, { toFile } from 'openai';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RequestLogRow } from '../src/types.js';
import { DEFAULT_ANTHROPIC_USAGE, DEFAULT_OPENAI_USAGE } from './fakes/index.js';
import {
  FAKE_BATCH_ANTHROPIC_MODEL,
  FAKE_BATCH_FAILED,
  FAKE_BATCH_LINES,
  FAKE_BATCH_OPENAI_MODEL,
  anthropicResultLines,
} from './fakes/batches.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';

/** A port for keyrelay chosen ahead, so that KEYRELAY_PUBLIC_URL can name it. */
async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

async function startPublicHarness(env: Record<string, string> = {}): Promise<Harness> {
  const port = await freePort();
  return startHarness({
    KEYRELAY_HOST: '127.0.0.1',
    KEYRELAY_PORT: String(port),
    KEYRELAY_PUBLIC_URL: `http://127.0.0.1:${port}`,
    ...env,
  });
}

const EPOCH = '2000-01-01T00:00:00.000Z';
// The documented batch discount (the library has no batch prices for these providers' models).
const BATCH_FACTOR = 0.5;
const SUCCEEDED = FAKE_BATCH_LINES - FAKE_BATCH_FAILED;

const openaiLinePrice = (): number => {
  const u = DEFAULT_OPENAI_USAGE;
  return calcPrice(
    { input_tokens: u.prompt_tokens, cache_read_tokens: u.cached_tokens, output_tokens: u.completion_tokens },
    FAKE_BATCH_OPENAI_MODEL,
    { providerId: 'openai' },
  )!.total_price;
};
const anthropicLinePrice = (): number => {
  const u = DEFAULT_ANTHROPIC_USAGE;
  return calcPrice(
    {
      input_tokens: u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens,
      cache_write_tokens: u.cache_creation_input_tokens,
      cache_read_tokens: u.cache_read_input_tokens,
      output_tokens: u.output_tokens,
    },
    FAKE_BATCH_ANTHROPIC_MODEL,
    { providerId: 'anthropic' },
  )!.total_price;
};

describe('batches through the official SDKs', () => {
  let h: Harness;
  let user: { key: string; keyId: string; accountId: string };

  beforeAll(async () => {
    h = await startPublicHarness();
    user = await h.newUser();
  });
  afterAll(() => h.close());

  const spend = async () => {
    await h.flushLog();
    return h.kr.services.logStore.spendSince(user.keyId, EPOCH);
  };
  const rows = async (): Promise<RequestLogRow[]> => {
    await h.flushLog();
    const page = await h.kr.services.logStore.listRequests({ account_id: user.accountId }, { limit: 200 });
    return Promise.all(
      page.items.map(async (r) => (await h.kr.services.logStore.getRequest(user.accountId, r.id))!),
    );
  };
  /**
   * The rows, once those of `ids` are in. A results download's row is queued after the batch ledger has
   * answered, which may be after the caller has read the whole body (the ledger is a store call).
   */
  const rowsWith = async (...ids: unknown[]): Promise<RequestLogRow[]> => {
    for (let i = 0; ; i++) {
      const all = await rows();
      if (ids.every((id) => all.some((r) => r.id === id)) || i === 100) return all;
      await new Promise((r) => setTimeout(r, 20));
    }
  };

  it('OpenAI: create, poll, download the output file twice; spend rises once by the batch total', async () => {
    const client = new OpenAI({
      apiKey: 'sk-test-canary-openai',
      baseURL: `${h.url}/api/proxy/openai/v1`,
      maxRetries: 0,
      defaultHeaders: { 'proxy-api-key': user.key },
    });
    const input = Buffer.from(
      `${JSON.stringify({ custom_id: 'r0', method: 'POST', url: '/v1/chat/completions', body: { model: FAKE_BATCH_OPENAI_MODEL, messages: [] } })}\n`,
    );
    const file = await client.files.create({ file: await toFile(input, 'batch.jsonl'), purpose: 'batch' });
    const created = await client.batches.create({
      input_file_id: file.id,
      endpoint: '/v1/chat/completions',
      completion_window: '24h',
    });
    expect(created.status).toBe('validating');
    const polled = await client.batches.retrieve(created.id);
    expect(polled.status).toBe('completed');
    const before = await spend();

    const downloads: string[] = [];
    for (let i = 0; i < 2; i++) {
      const res = await client.files.content(polled.output_file_id!);
      const text = await res.text();
      expect(text.trim().split('\n')).toHaveLength(FAKE_BATCH_LINES);
      downloads.push(res.headers.get('x-keyrelay-request-id')!);
    }
    const all = await rowsWith(...downloads);
    const total = SUCCEEDED * openaiLinePrice() * BATCH_FACTOR;
    expect((await spend()) - before).toBeCloseTo(total, 12);

    const [first, second] = downloads.map((id) => all.find((r) => r.id === id)!);
    expect(first!.cost_usd).toBeCloseTo(total, 12);
    expect(first!.price_source).toMatch(/^batch batch_\w+: genai-prices@.* × 0\.5 batch discount/);
    expect(first).toMatchObject({
      input_tokens: SUCCEEDED * DEFAULT_OPENAI_USAGE.prompt_tokens,
      output_tokens: SUCCEEDED * DEFAULT_OPENAI_USAGE.completion_tokens,
    });
    expect(second).toMatchObject({ cost_usd: 0, input_tokens: null });
    expect(second!.price_source).toMatch(/^not billed: results of batch .* already counted/);
    // The create and poll calls are not billed.
    const createRow = all.find((r) => r.method === 'POST' && r.path === '/v1/batches')!;
    expect(createRow).toMatchObject({ cost_usd: 0, price_source: 'not billed' });

    const [batch] = (await h.kr.services.logStore.listBatches(user.accountId, 10)).filter(
      (b) => b.batch_id === created.id,
    );
    expect(batch).toMatchObject({
      provider: 'openai',
      key_id: user.keyId,
      created_here: true,
      status: 'completed',
      output_file_id: polled.output_file_id,
      request_counts: { total: FAKE_BATCH_LINES, completed: SUCCEEDED, failed: FAKE_BATCH_FAILED },
      results_succeeded: SUCCEEDED,
      results_request_id: downloads[0],
    });
    expect(batch!.results_cost_usd).toBeCloseTo(total, 12);
  });

  it('Anthropic: results_url points at keyrelay, results fetched twice through it; spend rises once', async () => {
    const client = new Anthropic({
      apiKey: 'sk-ant-canary',
      baseURL: `${h.url}/api/proxy/anthropic`,
      maxRetries: 0,
      defaultHeaders: { 'proxy-api-key': user.key },
    });
    const created = await client.messages.batches.create({
      requests: [0, 1, 2].map((i) => ({
        custom_id: `request-${i}`,
        params: {
          model: FAKE_BATCH_ANTHROPIC_MODEL,
          max_tokens: 100,
          messages: [{ role: 'user', content: 'hi' }],
        },
      })),
    });
    expect(created.processing_status).toBe('in_progress');
    const polled = await client.messages.batches.retrieve(created.id);
    expect(polled.results_url).toBe(`${h.url}/api/proxy/anthropic/v1/messages/batches/${created.id}/results`);
    const before = await spend();
    const upstreamBefore = h.anthropic.requests.length;
    for (let i = 0; i < 2; i++) {
      const results: string[] = [];
      for await (const line of await client.messages.batches.results(created.id))
        results.push(line.result.type);
      expect(results).toEqual(['errored', 'succeeded', 'succeeded']);
    }
    // Each download: a retrieve and the results, both through keyrelay (never to api.anthropic.com).
    expect(h.anthropic.requests.length - upstreamBefore).toBe(4);
    const total = SUCCEEDED * anthropicLinePrice() * BATCH_FACTOR;
    expect((await spend()) - before).toBeCloseTo(total, 12);
    const downloads = (await rows()).filter((r) => r.path.endsWith(`${created.id}/results`));
    expect(downloads.map((r) => r.cost_usd).sort()).toEqual([0, expect.closeTo(total, 12)]);
    const [batch] = (await h.kr.services.logStore.listBatches(user.accountId, 10)).filter(
      (b) => b.batch_id === created.id,
    );
    expect(batch).toMatchObject({ provider: 'anthropic', created_here: true, status: 'ended' });
  });

  it('rewrites results_url in a compressed batch object, leaving the rest of the body as sent', async () => {
    const res = await request(`${h.url}/api/proxy/anthropic/v1/messages/batches/msgbatch_zip`, {
      headers: { 'proxy-api-key': user.key, 'x-api-key': 'sk-ant', 'x-fake-encoding': 'gzip' },
    });
    expect(res.headers['content-encoding']).toBeUndefined();
    const body = (await res.body.json()) as Record<string, unknown>;
    expect(body.results_url).toBe(`${h.url}/api/proxy/anthropic/v1/messages/batches/msgbatch_zip/results`);
    expect(body).toMatchObject({ id: 'msgbatch_zip', type: 'message_batch', processing_status: 'ended' });
  });

  it('a batch created elsewhere, with broken result lines: priced lines counted, the rest reported', async () => {
    const res = await request(`${h.url}/api/proxy/anthropic/v1/messages/batches/msgbatch_elsewhere/results`, {
      headers: {
        'proxy-api-key': user.key,
        'x-api-key': 'sk-ant',
        'x-fake-usage': '{"lines":4,"failed":1,"broken":2}',
      },
    });
    const text = await res.body.text();
    expect(text.trim().split('\n')).toHaveLength(6); // passed on untouched
    const id = res.headers['x-keyrelay-request-id'];
    const row = (await rowsWith(id)).find((r) => r.id === id)!;
    expect(row.cost_usd).toBeCloseTo(3 * anthropicLinePrice() * BATCH_FACTOR, 12);
    expect(row.price_source).toMatch(/; 2 lines unreadable$/);
    const [batch] = (await h.kr.services.logStore.listBatches(user.accountId, 50)).filter(
      (b) => b.batch_id === 'msgbatch_elsewhere',
    );
    expect(batch).toMatchObject({ created_here: false, results_succeeded: 3, results_broken: 2 });
  });

  it('the gzip-compressed output file of an OpenAI batch created elsewhere is priced and recorded once', async () => {
    const fetchOnce = async () => {
      const res = await request(`${h.url}/api/proxy/openai/v1/files/file-out-elsewhere/content`, {
        headers: { 'proxy-api-key': user.key, authorization: 'Bearer sk', 'x-fake-encoding': 'gzip' },
      });
      expect(res.headers['content-encoding']).toBe('gzip'); // passed on as sent
      await res.body.arrayBuffer();
      const id = res.headers['x-keyrelay-request-id'];
      return (await rowsWith(id)).find((r) => r.id === id)!;
    };
    const first = await fetchOnce();
    expect(first.cost_usd).toBeCloseTo(SUCCEEDED * openaiLinePrice() * BATCH_FACTOR, 12);
    expect((await fetchOnce()).cost_usd).toBe(0);
    const [batch] = (await h.kr.services.logStore.listBatches(user.accountId, 50)).filter(
      (b) => b.batch_id === 'file:file-out-elsewhere',
    );
    expect(batch).toMatchObject({ provider: 'openai', created_here: false, results_succeeded: SUCCEEDED });
  });

  it('an ordinary file download is not taken for batch results', async () => {
    const res = await request(`${h.url}/api/proxy/openai/v1/files/file-plain/content`, {
      headers: {
        'proxy-api-key': user.key,
        authorization: 'Bearer sk',
        'x-fake-usage': '{"lines":0,"failed":0}',
      },
    });
    await res.body.text();
    const id = res.headers['x-keyrelay-request-id'];
    const row = (await rowsWith(id)).find((r) => r.id === id)!;
    expect(row).toMatchObject({ cost_usd: 0, price_source: 'not billed' });
  });
});

describe('large results files', () => {
  let h: Harness;
  let upstream: Server;
  const LINES = 40_000;
  const PAD = 'x'.repeat(1800);
  const [line] = anthropicResultLines(2, 1).slice(1);
  // ~1.9 KB a line, ~77 MB in all, generated as it is sent.
  const padded = `${line!.slice(0, -1)},"pad":"${PAD}"}\n`;

  beforeAll(async () => {
    upstream = createServer((req, res) => {
      res.writeHead(200, { 'content-type': 'application/binary' });
      let sent = 0;
      const more = () => {
        while (sent < LINES) {
          sent++;
          if (!res.write(padded)) return void res.once('drain', more);
        }
        res.end();
      };
      more();
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    const port = (upstream.address() as AddressInfo).port;
    h = await startPublicHarness({ KEYRELAY_ANTHROPIC_UPSTREAM: `http://127.0.0.1:${port}` });
  });
  afterAll(async () => {
    await h.close();
    await new Promise<void>((resolve) => upstream.close(() => resolve()));
  });

  it('prices every line of a results file far larger than memory allows to hold, heap bounded', async () => {
    const user = await h.newUser();
    // Retained memory, not garbage: a full collection before each sample.
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    gc();
    const baseline = process.memoryUsage().heapUsed;
    let peak = 0;
    let bytes = 0;
    let sampled = 0;
    const res = await request(`${h.url}/api/proxy/anthropic/v1/messages/batches/msgbatch_big/results`, {
      headers: { 'proxy-api-key': user.key, 'x-api-key': 'sk-ant' },
    });
    for await (const chunk of res.body) {
      bytes += (chunk as Buffer).length;
      if (bytes - sampled > 8 * 1024 * 1024) {
        sampled = bytes;
        gc();
        peak = Math.max(peak, process.memoryUsage().heapUsed - baseline);
      }
    }
    expect(bytes).toBe(LINES * Buffer.byteLength(padded));
    // Holding the body (or its lines) would take over 70 MB.
    expect(peak).toBeLessThan(16 * 1024 * 1024);
    // Queued once the batch ledger has answered, which may be after the body was read.
    let row: RequestLogRow | null = null;
    for (let i = 0; row === null && i < 100; i++) {
      if (i > 0) await new Promise((r) => setTimeout(r, 20));
      await h.flushLog();
      row = await h.kr.services.logStore.getRequest(
        user.accountId,
        String(res.headers['x-keyrelay-request-id']),
      );
    }
    expect(row!.cost_usd).toBeCloseTo(LINES * anthropicLinePrice() * BATCH_FACTOR, 9);
    const [batch] = await h.kr.services.logStore.listBatches(user.accountId, 10);
    expect(batch).toMatchObject({ batch_id: 'msgbatch_big', results_succeeded: LINES, results_broken: 0 });
  });
});
