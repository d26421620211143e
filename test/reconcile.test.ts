/**
 * Reconciliation against the providers' own cost reports: fake OpenAI Costs API and Anthropic cost report
 * (test/fakes/cost-reports.ts, shaped and paged as documented) at the configured upstream origins, keyrelay
 * in this process, the official SDKs as clients, and the console API and the CLI as an operator uses them.
 */
import Anthropic from '@anthropic-ai/sdk';
import { calcPrice } from '@pydantic/genai-prices';
import OpenAI from 'openai';
import { request } from 'undici';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startFakeCostApi, type FakeCostApi } from './fakes/cost-reports.js';
import { DEFAULT_ANTHROPIC_USAGE, DEFAULT_OPENAI_USAGE } from './fakes/index.js';
import { makeLogRow } from './helpers/log-rows.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';
import { runCli } from './helpers/process.js';

const OPENAI_ADMIN = 'sk-admin-canaryOpenAI0123456789abcdef';
const ANTHROPIC_ADMIN = 'sk-ant-admin01-canaryAnthropic0123456789';
const SEEDED_DAY = '2026-11-20';

let h: Harness;
let openaiBill: FakeCostApi;
let anthropicBill: FakeCostApi;
let owner: { key: string; accountId: string; cookie: string };
let other: { cookie: string };

async function login(email: string): Promise<string> {
  const res = await request(`${h.url}/api/console/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', origin: h.url },
    body: JSON.stringify({ email, password: 'correct horse battery' }),
  });
  expect(res.statusCode).toBe(200);
  await res.body.dump();
  return String(res.headers['set-cookie']).split(';')[0]!;
}

async function reconcile(cookie: string, day?: string) {
  const res = await request(`${h.url}/api/console/reconcile${day ? `?day=${day}` : ''}`, {
    headers: { cookie },
  });
  const text = await res.body.text();
  return { status: res.statusCode, text, json: JSON.parse(text) as Reconciliation };
}

interface ModelDrift {
  model: string | null;
  keyrelay: { requests: number; cost_usd: number; unpriced_requests: number; partial_requests: number };
  provider: { cost_usd: number; items: Array<{ item: string; cost_usd: number }> };
  difference_usd: number;
  agrees: boolean;
  reasons: string[];
}
interface Reconciliation {
  day: string;
  final: boolean;
  providers: Array<{
    provider: string;
    error: string | null;
    keyrelay_cost_usd: number;
    provider_cost_usd: number | null;
    difference_usd: number | null;
    agrees: boolean | null;
    models: ModelDrift[];
  }>;
  not_configured: string[];
  error?: { code: string };
}

const today = () => new Date().toISOString().slice(0, 10);

beforeAll(async () => {
  openaiBill = await startFakeCostApi('openai', OPENAI_ADMIN);
  anthropicBill = await startFakeCostApi('anthropic', ANTHROPIC_ADMIN);
  h = await startHarness(
    {
      KEYRELAY_OPENAI_UPSTREAM: openaiBill.url,
      KEYRELAY_ANTHROPIC_UPSTREAM: anthropicBill.url,
      OPENAI_ADMIN_KEY: OPENAI_ADMIN,
      ANTHROPIC_ADMIN_KEY: ANTHROPIC_ADMIN,
    },
    { costReportFetch: { timeoutMs: 500, attempts: 3, backoffMs: 20, maxPages: 6 } },
  );
  openaiBill.forwardTo = h.openai.url;
  anthropicBill.forwardTo = h.anthropic.url;
  const made = await h.newUser('owner@example.com'); // the install's first account: its owner
  await h.newUser('member@example.com');
  owner = { ...made, cookie: await login('owner@example.com') };
  other = { cookie: await login('member@example.com') };
});
afterAll(async () => {
  await h.close();
  await openaiBill.close();
  await anthropicBill.close();
});
beforeEach(() => {
  openaiBill.fault = null;
  anthropicBill.fault = null;
  openaiBill.pageSize = 2;
  anthropicBill.pageSize = 2;
});

describe('reconcile: a seeded day where keyrelay and the bills agree', () => {
  beforeAll(async () => {
    const at = Date.parse(`${SEEDED_DAY}T09:00:00.000Z`);
    await h.kr.services.logStore.insertBatch([
      makeLogRow({ at, account_id: 'acct-a', model: 'gpt-4o-mini', cost_usd: 0.25 }),
      makeLogRow({ at: at + 1000, account_id: 'acct-b', model: 'gpt-4o-mini', cost_usd: 0.5 }),
      makeLogRow({ at: at + 2000, account_id: 'acct-b', model: 'gpt-4o', cost_usd: 1.125 }),
      makeLogRow({
        at: at + 3000,
        provider: 'anthropic',
        model: 'claude-sonnet-4-20250514',
        cost_usd: 0.75,
      }),
    ]);
    openaiBill.bills.set(SEEDED_DAY, [
      { model: 'gpt-4o-mini-2024-07-18', item: 'gpt-4o-mini-2024-07-18, input', usd: 0.5 },
      { model: 'gpt-4o-mini-2024-07-18', item: 'gpt-4o-mini-2024-07-18, output', usd: 0.25 },
      { model: 'gpt-4o-2024-08-06', item: 'gpt-4o-2024-08-06, input', usd: 1 },
      { model: 'gpt-4o-2024-08-06', item: 'gpt-4o-2024-08-06, cached input', usd: 0.0625 },
      { model: 'gpt-4o-2024-08-06', item: 'gpt-4o-2024-08-06, output', usd: 0.0625 },
    ]);
    anthropicBill.bills.set(SEEDED_DAY, [
      { model: 'claude-sonnet-4-20250514', item: 'Claude Sonnet 4 Usage - Input Tokens', usd: 0.5 },
      { model: 'claude-sonnet-4-20250514', item: 'Claude Sonnet 4 Usage - Output Tokens', usd: 0.25 },
    ]);
    // makeLogRow's tokens: 120 input (100 of them cache reads), 45 output.
    const per = (n: number) => ({
      requests: n,
      input_tokens: 120 * n,
      cache_read_tokens: 100 * n,
      output_tokens: 45 * n,
    });
    openaiBill.usage.set(SEEDED_DAY, [
      { model: 'gpt-4o-mini-2024-07-18', api_key_id: 'key_seeded', ...per(2) },
      { model: 'gpt-4o-2024-08-06', api_key_id: 'key_seeded', ...per(1) },
    ]);
    anthropicBill.usage.set(SEEDED_DAY, [
      { model: 'claude-sonnet-4-20250514', api_key_id: 'apikey_seeded', cache_write_tokens: 0, ...per(1) },
    ]);
  });

  it('shows zero difference per provider and model, reading every page of each report', async () => {
    openaiBill.reportRequests.length = 0;
    anthropicBill.reportRequests.length = 0;
    const r = await reconcile(owner.cookie, SEEDED_DAY);
    expect(r.status).toBe(200);
    expect(r.json.day).toBe(SEEDED_DAY);
    expect(r.json.final).toBe(true);
    const [oa, an] = r.json.providers;
    expect(oa).toMatchObject({
      provider: 'openai',
      error: null,
      keyrelay_cost_usd: 1.875,
      provider_cost_usd: 1.875,
      difference_usd: 0,
      agrees: true,
    });
    expect(
      oa!.models.map((m) => [m.model, m.keyrelay.requests, m.provider.cost_usd, m.difference_usd]),
    ).toEqual(
      expect.arrayContaining([
        ['gpt-4o-mini', 2, 0.75, 0],
        ['gpt-4o', 1, 1.125, 0],
      ]),
    );
    expect(oa!.models.find((m) => m.model === 'gpt-4o')!.provider.items).toHaveLength(3);
    expect(an).toMatchObject({
      provider: 'anthropic',
      provider_cost_usd: 0.75,
      difference_usd: 0,
      agrees: true,
    });
    // Five lines two to a page: three pages, each after the first asking for the cursor it was given.
    expect(openaiBill.reportRequests).toHaveLength(3);
    const queries = openaiBill.reportRequests.map((q) => new URL(q.url, 'http://x').searchParams);
    expect(queries[0]!.get('start_time')).toBe(String(Date.parse(`${SEEDED_DAY}T00:00:00Z`) / 1000));
    expect(queries[0]!.get('end_time')).toBe(String(Date.parse(`${SEEDED_DAY}T00:00:00Z`) / 1000 + 86_400));
    expect(queries[0]!.get('group_by')).toBe('line_item');
    expect(queries[0]!.get('page')).toBeNull();
    expect(queries[1]!.get('page')).toMatch(/^page_/);
    const aq = new URL(anthropicBill.reportRequests[0]!.url, 'http://x').searchParams;
    expect(aq.get('starting_at')).toBe(`${SEEDED_DAY}T00:00:00.000Z`);
    expect(aq.getAll('group_by[]')).toEqual(['description']);
    expect(anthropicBill.reportRequests[0]!.headers['anthropic-version']).toBe('2023-06-01');
  });

  it('keyrelay reconcile prints the same comparison as JSON, and as text', async () => {
    const env = {
      KEYRELAY_DATA_DIR: h.dataDir,
      KEYRELAY_OPENAI_UPSTREAM: openaiBill.url,
      KEYRELAY_ANTHROPIC_UPSTREAM: anthropicBill.url,
      OPENAI_ADMIN_KEY: OPENAI_ADMIN,
      ANTHROPIC_ADMIN_KEY: ANTHROPIC_ADMIN,
    };
    const json = await runCli(['reconcile', '--day', SEEDED_DAY, '--json'], env);
    expect(json.stderr).toBe('');
    expect(json.code).toBe(0);
    const out = JSON.parse(json.stdout) as Reconciliation;
    expect(out.providers.map((p) => [p.provider, p.provider_cost_usd, p.difference_usd, p.agrees])).toEqual([
      ['openai', 1.875, 0, true],
      ['anthropic', 0.75, 0, true],
    ]);
    const text = await runCli(['reconcile', '--day', SEEDED_DAY], env);
    expect(text.code).toBe(0);
    expect(text.stdout).toContain('openai: keyrelay $1.8750  billed $1.8750  difference +$0.0000  (agrees)');
    const none = await runCli(['reconcile', '--day', SEEDED_DAY], {
      ...env,
      OPENAI_ADMIN_KEY: '',
      ANTHROPIC_ADMIN_KEY: '',
    });
    expect(none.code).toBe(1);
    expect(none.stderr).toContain('set OPENAI_ADMIN_KEY and/or ANTHROPIC_ADMIN_KEY');
    const wrong = await runCli(['reconcile', '--day', '2026-02-30'], env);
    expect(wrong.code).toBe(2);
    expect(wrong.stderr).toContain('--day must be a date');
  });
});

describe('reconcile: traffic that bypassed keyrelay', () => {
  const BIG = { prompt_tokens: 2_000_000, completion_tokens: 500_000, cached_tokens: 0, reasoning_tokens: 0 };
  const openaiCall = calcPrice(
    { input_tokens: BIG.prompt_tokens, cache_read_tokens: 0, output_tokens: BIG.completion_tokens },
    'gpt-4o-mini',
    { providerId: 'openai' },
  );
  const u = { ...DEFAULT_ANTHROPIC_USAGE, input_tokens: 1_000_000 };
  const anthropicCall = calcPrice(
    {
      input_tokens: u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens,
      cache_write_tokens: u.cache_creation_input_tokens,
      cache_read_tokens: u.cache_read_input_tokens,
      output_tokens: u.output_tokens,
    },
    'claude-sonnet-4-20250514',
    { providerId: 'anthropic' },
  );

  it('shows the bill above keyrelay by the bypassing calls, and says why', async () => {
    expect(openaiCall).toBeDefined();
    expect(anthropicCall).toBeDefined();
    expect(DEFAULT_OPENAI_USAGE.prompt_tokens).toBeLessThan(BIG.prompt_tokens);
    const usage = { 'x-fake-usage': JSON.stringify(BIG) };
    const through = new OpenAI({
      apiKey: 'sk-provider',
      baseURL: `${h.url}/api/proxy/openai/v1`,
      defaultHeaders: { 'proxy-api-key': owner.key, ...usage },
    });
    const direct = new OpenAI({
      apiKey: 'sk-provider',
      baseURL: `${h.openai.url}/v1`,
      defaultHeaders: usage,
    });
    const ask = { model: 'gpt-4o-mini', messages: [{ role: 'user' as const, content: 'hi' }] };
    await through.chat.completions.create(ask);
    await through.chat.completions.create(ask);
    await direct.chat.completions.create(ask); // never seen by keyrelay, billed all the same
    // An Anthropic model used only outside keyrelay.
    const anthropicDirect = new Anthropic({
      apiKey: 'sk-ant-provider',
      baseURL: h.anthropic.url,
      defaultHeaders: { 'x-fake-usage': JSON.stringify({ input_tokens: u.input_tokens }) },
    });
    await anthropicDirect.messages.create({
      model: 'claude-sonnet-4-20250514',
      max_tokens: 16,
      messages: [{ role: 'user', content: 'hi' }],
    });
    await h.flushLog();

    const day = today();
    const perCall = openaiCall!;
    openaiBill.bills.set(day, [
      {
        model: 'gpt-4o-mini-2024-07-18',
        item: 'gpt-4o-mini-2024-07-18, input',
        usd: 3 * perCall.input_price,
      },
      {
        model: 'gpt-4o-mini-2024-07-18',
        item: 'gpt-4o-mini-2024-07-18, output',
        usd: 3 * perCall.output_price,
      },
    ]);
    anthropicBill.bills.set(day, [
      {
        model: 'claude-sonnet-4-20250514',
        item: 'Claude Sonnet 4 Usage - Input Tokens',
        usd: anthropicCall!.total_price,
      },
      { model: null, item: 'Web Search Usage', usd: 0.01 },
    ]);
    const r = await reconcile(owner.cookie, day);
    expect(r.status).toBe(200);
    expect(r.json.final).toBe(false);
    const oa = r.json.providers.find((p) => p.provider === 'openai')!;
    const mini = oa.models.find((m) => m.model === 'gpt-4o-mini')!;
    expect(mini.keyrelay.requests).toBe(2);
    expect(mini.keyrelay.cost_usd).toBeCloseTo(2 * perCall.total_price, 6);
    expect(mini.provider.cost_usd).toBeCloseTo(3 * perCall.total_price, 6);
    // Signed: the provider billed one call more than keyrelay logged.
    expect(mini.difference_usd).toBeCloseTo(perCall.total_price, 6);
    expect(mini.difference_usd).toBeGreaterThan(0.005);
    expect(mini.agrees).toBe(false);
    expect(mini.reasons.join(' ')).toContain('calls that did not pass through keyrelay');
    expect(oa.agrees).toBe(false);

    const an = r.json.providers.find((p) => p.provider === 'anthropic')!;
    const sonnet = an.models.find((m) => m.model === 'claude-sonnet-4-20250514')!;
    expect(sonnet.keyrelay.requests).toBe(0);
    expect(sonnet.difference_usd).toBeCloseTo(anthropicCall!.total_price, 6);
    expect(sonnet.reasons[0]).toContain('no call to this model passed through keyrelay');
    const untied = an.models.find((m) => m.model === null)!;
    expect(untied.provider.items).toEqual([{ item: 'Web Search Usage', cost_usd: 0.01 }]);
    expect(untied.reasons[0]).toContain('tied to no model');
  });
});

describe('reconcile: an admin API that fails', () => {
  it('retries a 500 and a 429 (Retry-After) and then reads the report', async () => {
    openaiBill.fault = { status: 500, times: 1 };
    anthropicBill.fault = { status: 429, times: 2, retryAfter: '0' };
    openaiBill.reportRequests.length = 0;
    const r = await reconcile(owner.cookie, SEEDED_DAY);
    expect(r.json.providers.map((p) => [p.error, p.agrees])).toEqual([
      [null, true],
      [null, true],
    ]);
    expect(openaiBill.reportRequests.length).toBe(4); // one refused, then three pages
  });

  it('gives up after the tries with a clear message, and still shows the other provider', async () => {
    openaiBill.fault = { status: 503, message: 'overloaded' };
    const r = await reconcile(owner.cookie, SEEDED_DAY);
    expect(r.status).toBe(200);
    const [oa, an] = r.json.providers;
    expect(oa!.error).toBe("OpenAI's cost report failed after 3 tries: HTTP 503: overloaded");
    expect(oa).toMatchObject({
      provider_cost_usd: null,
      difference_usd: null,
      agrees: null,
      keyrelay_cost_usd: 1.875,
    });
    expect(an).toMatchObject({ error: null, agrees: true });
  });

  it('a report that never answers ends at the deadline, and the proxy keeps serving meanwhile', async () => {
    anthropicBill.fault = { hang: true };
    const pending = reconcile(owner.cookie, SEEDED_DAY);
    const client = new OpenAI({
      apiKey: 'sk-provider',
      baseURL: `${h.url}/api/proxy/openai/v1`,
      defaultHeaders: { 'proxy-api-key': owner.key },
    });
    const answer = await client.chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'still there?' }],
    });
    expect(answer.choices.length).toBeGreaterThan(0);
    const r = await pending;
    const an = r.json.providers.find((p) => p.provider === 'anthropic')!;
    expect(an.error).toBe("Anthropic's cost report failed after 3 tries: no answer within 0.5 s");
    expect(r.json.providers.find((p) => p.provider === 'openai')!.agrees).toBe(true);
  });

  it('a report that pages forever is cut at the page bound', async () => {
    openaiBill.fault = { endless: true };
    const r = await reconcile(owner.cookie, SEEDED_DAY);
    expect(r.json.providers[0]!.error).toBe(
      "OpenAI's cost report did not end after 6 pages (has_more stayed true)",
    );
  });

  it('a refusal (401) is not retried and says what the provider said', async () => {
    anthropicBill.fault = { status: 401, message: 'invalid x-api-key' };
    anthropicBill.reportRequests.length = 0;
    const r = await reconcile(owner.cookie, SEEDED_DAY);
    expect(r.json.providers[1]!.error).toBe("Anthropic's cost report refused: HTTP 401: invalid x-api-key");
    expect(anthropicBill.reportRequests).toHaveLength(1);
  });

  it('a redirect is not followed: the admin key goes to the configured origin only', async () => {
    openaiBill.fault = { status: 307, message: 'moved' };
    openaiBill.reportRequests.length = 0;
    const r = await reconcile(owner.cookie, SEEDED_DAY);
    expect(r.json.providers[0]!.error).toBe("OpenAI's cost report refused: HTTP 307: moved");
    expect(openaiBill.reportRequests).toHaveLength(1);
  });

  it('counts failures and the last difference in /metrics', async () => {
    openaiBill.fault = { status: 500 };
    await reconcile(owner.cookie, SEEDED_DAY);
    const metrics = await (await request(`${h.url}/metrics`)).body.text();
    expect(metrics).toMatch(/keyrelay_reconcile_errors_total\{provider="openai"\} [1-9]/);
    expect(metrics).toMatch(/keyrelay_reconcile_difference_usd\{provider="anthropic"\} 0/);
  });
});

describe('reconcile: who may see it', () => {
  it('answers the install owner only', async () => {
    const r = await reconcile(other.cookie, SEEDED_DAY);
    expect(r.status).toBe(403);
    expect(r.json.error?.code).toBe('forbidden');
    const anon = await request(`${h.url}/api/console/reconcile`);
    expect(anon.statusCode).toBe(401);
    await anon.body.dump();
  });

  it('refuses a day that is not a date or has not begun', async () => {
    for (const day of ['2026-13-01', 'yesterday', '2999-01-01']) {
      const r = await reconcile(owner.cookie, day);
      expect(r.status).toBe(400);
      expect(r.json.error?.code).toBe('invalid_time');
    }
  });
});
