/**
 * Batches on both providers through the official SDKs: the batch is recorded against
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
import { setKeyLimits } from '../src/keys/actions.js';
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
    // A batch the ledger failed to record is only a warning in the log: shown, should a test here fail.
    KEYRELAY_LOG_LEVEL: 'warn',
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
    const downloadRows = async () => (await rows()).filter((r) => r.path.endsWith(`${created.id}/results`));
    // Each download's row is queued after the batch ledger has answered (rowsWith, above).
    await expect.poll(async () => (await downloadRows()).length, { timeout: 10_000 }).toBe(2);
    const downloads = await downloadRows();
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

  it('a batch whose lines ran server tools: searches priced at the batch rate, the container fee named', async () => {
    const res = await request(`${h.url}/api/proxy/anthropic/v1/messages/batches/msgbatch_tools/results`, {
      headers: {
        'proxy-api-key': user.key,
        'x-api-key': 'sk-ant',
        'x-fake-usage': '{"lines":3,"failed":1,"web_searches":2,"containers":1}',
      },
    });
    await res.body.text();
    const id = res.headers['x-keyrelay-request-id'];
    const row = (await rowsWith(id)).find((r) => r.id === id)!;
    const u = DEFAULT_ANTHROPIC_USAGE;
    const line = calcPrice(
      {
        input_tokens: u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens,
        cache_write_tokens: u.cache_creation_input_tokens,
        cache_read_tokens: u.cache_read_input_tokens,
        output_tokens: u.output_tokens,
        web_searches: 2,
      },
      FAKE_BATCH_ANTHROPIC_MODEL,
      { providerId: 'anthropic' },
    )!.total_price;
    expect(row.cost_usd).toBeCloseTo(2 * line * BATCH_FACTOR, 12);
    expect(row.price_source).toMatch(
      /^partial: batch msgbatch_tools: genai-prices@\S+ has no price for code_execution_containers ×1 on /,
    );
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

  it("each account's batches are its own: another account's download takes neither cost nor card", async () => {
    const other = await h.newUser();
    const clientOf = (key: string) =>
      new OpenAI({
        apiKey: 'sk-test-canary-shared-org',
        baseURL: `${h.url}/api/proxy/openai/v1`,
        maxRetries: 0,
        defaultHeaders: { 'proxy-api-key': key },
      });
    const mine = clientOf(user.key);
    const theirs = clientOf(other.key);
    const created = await mine.batches.create({
      input_file_id: 'file-in-shared',
      endpoint: '/v1/chat/completions',
      completion_window: '24h',
    });
    const polled = await mine.batches.retrieve(created.id);
    const download = async (client: OpenAI) => {
      const res = await client.files.content(polled.output_file_id!);
      await res.text();
      return res.headers.get('x-keyrelay-request-id')!;
    };
    // The other account (a key on the same provider organization) downloads the results first.
    const theirId = await download(theirs);
    const myId = await download(mine);
    const rowOf = async (accountId: string, id: string) => {
      for (let i = 0; ; i++) {
        await h.flushLog();
        const r = await h.kr.services.logStore.getRequest(accountId, id);
        if (r || i === 100) return r;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    };
    const total = SUCCEEDED * openaiLinePrice() * BATCH_FACTOR;
    expect((await rowOf(other.accountId, theirId))!.cost_usd).toBeCloseTo(total, 12);
    expect((await rowOf(user.accountId, myId))!.cost_usd).toBeCloseTo(total, 12);
    const [card] = (await h.kr.services.logStore.listBatches(user.accountId, 50)).filter(
      (b) => b.batch_id === created.id,
    );
    expect(card).toMatchObject({ key_id: user.keyId, created_here: true, results_request_id: myId });
    // The other account never saw the batch: its download is filed under the output file, as its own.
    const theirCards = await h.kr.services.logStore.listBatches(other.accountId, 50);
    expect(theirCards.map((b) => [b.batch_id, b.key_id, b.results_request_id])).toEqual([
      [`file:${polled.output_file_id}`, other.keyId, theirId],
    ]);
  });

  describe('under a model list, a batch runs what its requests name: a decoy `model` gets nothing past', () => {
    let limited: { key: string; keyId: string; accountId: string };
    beforeAll(async () => {
      limited = await h.newUser();
      await setKeyLimits({ store: h.kr.services.configStore, bus: h.kr.services.bus }, null, limited.keyId, {
        allowed_models: ['gpt-4o-mini*', 'claude-sonnet-4*'],
      });
    });
    const upstreamCalls = (
      fake: { requests: { method: string; url: string }[] },
      method: string,
      path: string,
    ) => fake.requests.filter((r) => r.method === method && r.url.startsWith(path)).length;
    const jsonl = (model: string) =>
      `${JSON.stringify({ custom_id: 'r0', method: 'POST', url: '/v1/chat/completions', body: { model, messages: [] } })}\n`;

    it('OpenAI batch creation: checked against the models its input file names', async () => {
      const create = (inputFile: string, extra: Record<string, unknown> = {}) =>
        request(`${h.url}/api/proxy/openai/v1/batches`, {
          method: 'POST',
          headers: {
            'proxy-api-key': limited.key,
            authorization: 'Bearer sk',
            'content-type': 'application/json',
          },
          body: JSON.stringify({
            input_file_id: inputFile,
            endpoint: '/v1/chat/completions',
            completion_window: '24h',
            ...extra,
          }),
        });
      const before = upstreamCalls(h.openai, 'POST', '/v1/batches');
      for (const extra of [{}, { model: 'gpt-4o-mini' }]) {
        const res = await create('file-in-o1-pro', extra);
        const body = (await res.body.json()) as { error: { code: string; message: string } };
        expect(res.statusCode, JSON.stringify(extra)).toBe(403);
        expect(body.error).toMatchObject({
          code: 'proxy_key_forbidden',
          message: expect.stringContaining('o1-pro'),
        });
      }
      expect(upstreamCalls(h.openai, 'POST', '/v1/batches')).toBe(before);
      // Through the SDK, a file of allowed requests: created.
      const client = new OpenAI({
        apiKey: 'sk-test',
        baseURL: `${h.url}/api/proxy/openai/v1`,
        maxRetries: 0,
        defaultHeaders: { 'proxy-api-key': limited.key },
      });
      const ok = await client.batches.create({
        input_file_id: 'file-in-gpt-4o-mini-2024-07-18',
        endpoint: '/v1/chat/completions',
        completion_window: '24h',
      });
      expect(ok.object).toBe('batch');
      // A file whose lines name no model keyrelay can read is refused, not passed.
      const missing = await create('file-out-not-an-input', { model: 'gpt-4o-mini' });
      await missing.body.dump();
      expect(missing.statusCode).toBe(403);
    });

    it('OpenAI batch upload: the JSONL file part is read for its models; a `model` part is not', async () => {
      const upload = (lines: string, decoy: string | null) => {
        const part = (name: string, value: string, file?: string) =>
          `--b0und\r\nContent-Disposition: form-data; name="${name}"${file ? `; filename="${file}"\r\nContent-Type: application/jsonl` : ''}\r\n\r\n${value}\r\n`;
        return request(`${h.url}/api/proxy/openai/v1/files`, {
          method: 'POST',
          headers: {
            'proxy-api-key': limited.key,
            authorization: 'Bearer sk',
            'content-type': 'multipart/form-data; boundary=b0und',
          },
          body:
            part('file', lines, 'batch.jsonl') +
            part('purpose', 'batch') +
            (decoy ? part('model', decoy) : '') +
            '--b0und--\r\n',
        });
      };
      const before = upstreamCalls(h.openai, 'POST', '/v1/files');
      for (const decoy of [null, 'gpt-4o-mini']) {
        const res = await upload(jsonl('gpt-4o-mini') + jsonl('o1-pro'), decoy);
        await res.body.dump();
        expect(res.statusCode, String(decoy)).toBe(403);
      }
      expect(upstreamCalls(h.openai, 'POST', '/v1/files')).toBe(before);
      const client = new OpenAI({
        apiKey: 'sk-test',
        baseURL: `${h.url}/api/proxy/openai/v1`,
        maxRetries: 0,
        defaultHeaders: { 'proxy-api-key': limited.key },
      });
      const file = await client.files.create({
        file: await toFile(Buffer.from(jsonl('gpt-4o-mini') + jsonl('gpt-4o-mini')), 'batch.jsonl'),
        purpose: 'batch',
      });
      expect(file.purpose).toBe('batch');
    });

    it("Anthropic batch creation: every request's model is checked, a top-level `model` is not", async () => {
      const client = new Anthropic({
        apiKey: 'sk-ant-test',
        baseURL: `${h.url}/api/proxy/anthropic`,
        maxRetries: 0,
        defaultHeaders: { 'proxy-api-key': limited.key },
      });
      const requests = (models: string[]) =>
        models.map((model, i) => ({
          custom_id: `r${i}`,
          params: { model, max_tokens: 10, messages: [{ role: 'user' as const, content: 'hi' }] },
        }));
      const before = upstreamCalls(h.anthropic, 'POST', '/v1/messages/batches');
      const res = await request(`${h.url}/api/proxy/anthropic/v1/messages/batches`, {
        method: 'POST',
        headers: { 'proxy-api-key': limited.key, 'x-api-key': 'sk-ant', 'content-type': 'application/json' },
        body: JSON.stringify({
          model: 'claude-sonnet-4-6',
          requests: requests(['claude-sonnet-4-6', 'claude-opus-4-1']),
        }),
      });
      await res.body.dump();
      expect(res.statusCode).toBe(403);
      expect(upstreamCalls(h.anthropic, 'POST', '/v1/messages/batches')).toBe(before);
      const ok = await client.messages.batches.create({ requests: requests(['claude-sonnet-4-6']) });
      expect(ok.type).toBe('message_batch');
    });
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
