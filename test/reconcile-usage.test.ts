/**
 * Reconciliation of tokens: the official SDKs make calls through keyrelay (and around it) against the fake
 * upstreams; the fake providers' usage reports (test/fakes/cost-reports.ts, shaped and paged as documented:
 * OpenAI's Usage API, Anthropic's messages usage report, grouped by model and api_key_id) count those
 * calls; the console API, the CLI and /metrics set keyrelay's tokens beside them, per model and per
 * provider API key once the owner links a key id to a credential's fingerprint.
 */
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { request } from 'undici';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startFakeCostApi, type FakeCostApi, type FakeUsageLine } from './fakes/cost-reports.js';
import { DEFAULT_ANTHROPIC_USAGE } from './fakes/index.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';
import { runCli } from './helpers/process.js';

const OPENAI_ADMIN = 'sk-admin-usageOpenAI0123456789abcdef';
const ANTHROPIC_ADMIN = 'sk-ant-admin01-usageAnthropic0123456789';
const OPENAI_KEY_A = 'sk-proj-A-through-keyrelay';
const OPENAI_KEY_B = 'sk-proj-B-never-through-keyrelay';
const ANTHROPIC_KEY_A = 'sk-ant-api03-A-through-keyrelay';

// The fakes' usage per call, as the test asks for it.
const OPENAI_CALL = { prompt_tokens: 1200, completion_tokens: 300, cached_tokens: 1000, reasoning_tokens: 0 };
const ANTHROPIC_CALL = { ...DEFAULT_ANTHROPIC_USAGE, input_tokens: 400, cache_creation_input_tokens: 50 };
// In keyrelay's terms (and the usage report's, read into them): input counts cache reads and writes.
const ANTHROPIC_INPUT =
  ANTHROPIC_CALL.input_tokens +
  ANTHROPIC_CALL.cache_creation_input_tokens +
  ANTHROPIC_CALL.cache_read_input_tokens;

interface TokenDrift {
  kind: string;
  keyrelay: number;
  provider: number;
  difference: number;
  drift: number | null;
}
interface KeyDrift {
  api_key_id: string | null;
  fingerprint: string | null;
  keyrelay: { input_tokens: number } | null;
  tokens: TokenDrift[];
  agrees: boolean | null;
  reasons: string[];
}
interface ProviderView {
  provider: string;
  error: string | null;
  usage_error: string | null;
  agrees: boolean | null;
  tokens: TokenDrift[];
  models: Array<{
    model: string | null;
    tokens: TokenDrift[];
    provider: { usage: { requests: number | null } | null };
    agrees: boolean;
    reasons: string[];
  }>;
  keys: KeyDrift[];
  unlinked_credentials: Array<{ fingerprint: string; requests: number }>;
}
interface Reconciliation {
  providers: ProviderView[];
}

let h: Harness;
let openaiBill: FakeCostApi;
let anthropicBill: FakeCostApi;
let owner: { key: string; cookie: string; accountId: string };
const day = () => new Date().toISOString().slice(0, 10);

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

async function reconcile(): Promise<Reconciliation> {
  const res = await request(`${h.url}/api/console/reconcile?day=${day()}`, {
    headers: { cookie: owner.cookie },
  });
  const text = await res.body.text();
  expect(res.statusCode, text).toBe(200);
  return JSON.parse(text) as Reconciliation;
}

async function link(provider: string, apiKeyId: string, fingerprint: string | null) {
  const res = await request(`${h.url}/api/console/reconcile/links/${provider}/${apiKeyId}`, {
    method: fingerprint === null ? 'DELETE' : 'PUT',
    headers: { cookie: owner.cookie, origin: h.url, 'content-type': 'application/json' },
    body: JSON.stringify(fingerprint === null ? {} : { fingerprint }),
  });
  const text = await res.body.text();
  expect(res.statusCode, text).toBe(fingerprint === null ? 204 : 200);
}

interface LinkAuditEntry {
  actor_email: string | null;
  target: string;
  before: unknown;
  after: unknown;
}

/** The owner's organization's audit entries for link changes, oldest first. */
async function linkAudit(): Promise<LinkAuditEntry[]> {
  const res = await request(`${h.url}/api/console/orgs/${owner.accountId}/audit?action=reconcile.link`, {
    headers: { cookie: owner.cookie },
  });
  const text = await res.body.text();
  expect(res.statusCode, text).toBe(200);
  return (JSON.parse(text) as { entries: LinkAuditEntry[] }).entries.reverse();
}

/** The credentials the owner's account sent, as the console lists them (fingerprint only). */
async function credentials(): Promise<string[]> {
  const res = await request(`${h.url}/api/console/credentials`, { headers: { cookie: owner.cookie } });
  const body = (await res.body.json()) as { credentials: Array<{ fingerprint: string }> };
  return body.credentials.map((c) => c.fingerprint);
}

const through = (apiKey: string) =>
  new OpenAI({
    apiKey,
    baseURL: `${h.url}/api/proxy/openai/v1`,
    defaultHeaders: { 'proxy-api-key': owner.key, 'x-fake-usage': JSON.stringify(OPENAI_CALL) },
  });
const ask = { model: 'gpt-4o-mini', messages: [{ role: 'user' as const, content: 'hi' }] };

const openaiLine = (apiKeyId: string, calls: number): FakeUsageLine => ({
  model: 'gpt-4o-mini-2024-07-18',
  api_key_id: apiKeyId,
  requests: calls,
  input_tokens: calls * OPENAI_CALL.prompt_tokens,
  cache_read_tokens: calls * OPENAI_CALL.cached_tokens,
  output_tokens: calls * OPENAI_CALL.completion_tokens,
});

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
    { costReportFetch: { timeoutMs: 500, attempts: 3, backoffMs: 20, maxPages: 6, deadlineMs: 5_000 } },
  );
  openaiBill.forwardTo = h.openai.url;
  anthropicBill.forwardTo = h.anthropic.url;
  const made = await h.newUser('owner@example.com');
  owner = { key: made.key, cookie: await login('owner@example.com'), accountId: made.accountId };
});
afterAll(async () => {
  await h.close();
  await openaiBill.close();
  await anthropicBill.close();
});
beforeEach(() => {
  for (const b of [openaiBill, anthropicBill]) {
    b.fault = null;
    b.usageFault = null;
    b.pageSize = 2;
  }
});

describe('tokens: keyrelay beside the providers’ usage reports', () => {
  let fpOpenAI: string;
  let fpAnthropic: string;

  it('agree to the token when every call went through keyrelay, per model and per linked key', async () => {
    await through(OPENAI_KEY_A).chat.completions.create(ask);
    await through(OPENAI_KEY_A)
      .chat.completions.create({ ...ask, stream: true })
      .then(async (s) => {
        for await (const _ of s);
      });
    const claude = new Anthropic({
      apiKey: ANTHROPIC_KEY_A,
      baseURL: `${h.url}/api/proxy/anthropic`,
      defaultHeaders: { 'proxy-api-key': owner.key, 'x-fake-usage': JSON.stringify(ANTHROPIC_CALL) },
    });
    await claude.messages.create({
      model: 'claude-sonnet-4-20250514',
      max_tokens: 16,
      messages: [{ role: 'user', content: 'hi' }],
    });
    await h.flushLog();
    [fpOpenAI, fpAnthropic] = await credentials().then((fps) => {
      expect(fps).toHaveLength(2);
      return fps;
    });
    openaiBill.usage.set(day(), [openaiLine('key_A', 2)]);
    anthropicBill.usage.set(day(), [
      {
        model: 'claude-sonnet-4-20250514',
        api_key_id: 'apikey_A',
        requests: 1,
        input_tokens: ANTHROPIC_INPUT,
        cache_read_tokens: ANTHROPIC_CALL.cache_read_input_tokens,
        cache_write_tokens: ANTHROPIC_CALL.cache_creation_input_tokens,
        output_tokens: ANTHROPIC_CALL.output_tokens,
      },
    ]);

    // Before any link: the tokens agree by model, and the provider's key is one keyrelay cannot place.
    let r = await reconcile();
    let oa = r.providers.find((p) => p.provider === 'openai')!;
    expect(oa.usage_error).toBeNull();
    expect(oa.tokens).toEqual([
      { kind: 'input', keyrelay: 2400, provider: 2400, difference: 0, drift: 0 },
      { kind: 'cache_read', keyrelay: 2000, provider: 2000, difference: 0, drift: 0 },
      { kind: 'output', keyrelay: 600, provider: 600, difference: 0, drift: 0 },
    ]);
    expect(oa.keys).toMatchObject([{ api_key_id: 'key_A', fingerprint: null, agrees: null }]);
    expect(oa.keys[0]!.reasons[0]).toContain('not linked to a credential keyrelay saw');
    expect(oa.unlinked_credentials.map((c) => c.requests)).toEqual([2]);

    // The owner ties each provider key id to the credential it is (the provider's console shows the
    // key's id beside its redacted value; keyrelay's console shows the fingerprint).
    const openaiFp = oa.unlinked_credentials[0]!.fingerprint;
    expect([fpOpenAI, fpAnthropic]).toContain(openaiFp);
    const anthropicFp = [fpOpenAI, fpAnthropic].find((f) => f !== openaiFp)!;
    await link('openai', 'key_A', openaiFp);
    await link('anthropic', 'apikey_A', anthropicFp);
    r = await reconcile();
    oa = r.providers.find((p) => p.provider === 'openai')!;
    const an = r.providers.find((p) => p.provider === 'anthropic')!;
    expect(oa.keys).toMatchObject([
      {
        api_key_id: 'key_A',
        fingerprint: openaiFp,
        agrees: true,
        reasons: [],
        keyrelay: { input_tokens: 2400 },
      },
    ]);
    expect(oa.unlinked_credentials).toEqual([]);
    expect(oa.models[0]!.provider.usage!.requests).toBe(2);
    expect(an.tokens).toEqual([
      { kind: 'input', keyrelay: ANTHROPIC_INPUT, provider: ANTHROPIC_INPUT, difference: 0, drift: 0 },
      {
        kind: 'cache_read',
        keyrelay: ANTHROPIC_CALL.cache_read_input_tokens,
        provider: ANTHROPIC_CALL.cache_read_input_tokens,
        difference: 0,
        drift: 0,
      },
      {
        kind: 'cache_write',
        keyrelay: ANTHROPIC_CALL.cache_creation_input_tokens,
        provider: ANTHROPIC_CALL.cache_creation_input_tokens,
        difference: 0,
        drift: 0,
      },
      {
        kind: 'output',
        keyrelay: ANTHROPIC_CALL.output_tokens,
        provider: ANTHROPIC_CALL.output_tokens,
        difference: 0,
        drift: 0,
      },
    ]);
    expect(an.keys).toMatchObject([{ api_key_id: 'apikey_A', fingerprint: anthropicFp, agrees: true }]);
    expect(an.models.find((m) => m.model === 'claude-sonnet-4-20250514')!.agrees).toBe(true);
  });

  it('shows traffic that bypassed keyrelay as a signed drift, naming the key it came under', async () => {
    // One call on a key keyrelay never sees, one more on key A straight to the provider.
    const direct = (apiKey: string) =>
      new OpenAI({
        apiKey,
        baseURL: `${h.openai.url}/v1`,
        defaultHeaders: { 'x-fake-usage': JSON.stringify(OPENAI_CALL) },
      });
    await direct(OPENAI_KEY_B).chat.completions.create(ask);
    await direct(OPENAI_KEY_A).chat.completions.create(ask);
    openaiBill.usage.set(day(), [openaiLine('key_A', 3), openaiLine('key_B', 1)]);
    const r = await reconcile();
    const oa = r.providers.find((p) => p.provider === 'openai')!;
    const input = oa.tokens.find((t) => t.kind === 'input')!;
    // Provider − keyrelay: two calls' tokens more, a third of what the provider counted.
    expect(input).toEqual({
      kind: 'input',
      keyrelay: 2 * OPENAI_CALL.prompt_tokens,
      provider: 4 * OPENAI_CALL.prompt_tokens,
      difference: 2 * OPENAI_CALL.prompt_tokens,
      drift: 0.5,
    });
    expect(oa.agrees).toBe(false);
    const mini = oa.models.find((m) => m.model === 'gpt-4o-mini')!;
    expect(mini.agrees).toBe(false);
    expect(mini.reasons.join('\n')).toContain(
      'tokens under API key key_B (not linked to a credential keyrelay saw): likely traffic that did not go through keyrelay',
    );
    const [keyA, keyB] = [
      oa.keys.find((k) => k.api_key_id === 'key_A')!,
      oa.keys.find((k) => k.api_key_id === 'key_B')!,
    ];
    expect(keyA.tokens.find((t) => t.kind === 'output')).toMatchObject({
      keyrelay: 600,
      provider: 900,
      difference: 300,
    });
    expect(keyA.agrees).toBe(false);
    expect(keyA.reasons[0]).toContain('calls with it that did not pass through keyrelay');
    expect(keyB).toMatchObject({ fingerprint: null, agrees: null });
    expect(keyB.reasons[0]).toContain('traffic that did not go through keyrelay');

    // The other way: the provider counted fewer than keyrelay logged (a call on another organization's
    // credential, say): the difference is negative.
    openaiBill.usage.set(day(), [openaiLine('key_A', 1)]);
    const fewer = (await reconcile()).providers.find((p) => p.provider === 'openai')!;
    expect(fewer.tokens.find((t) => t.kind === 'input')!.difference).toBe(-OPENAI_CALL.prompt_tokens);
    expect(fewer.models[0]!.reasons.join('\n')).toContain(
      'keyrelay logged more tokens than the provider counted',
    );
    expect(fewer.keys[0]!.reasons[0]).toContain('keyrelay logged more with this credential');
  });

  it('keyrelay reconcile --json and the text carry the tokens and the keys; /metrics the token difference', async () => {
    openaiBill.usage.set(day(), [openaiLine('key_A', 3), openaiLine('key_B', 1)]);
    const env = {
      KEYRELAY_DATA_DIR: h.dataDir,
      KEYRELAY_OPENAI_UPSTREAM: openaiBill.url,
      KEYRELAY_ANTHROPIC_UPSTREAM: anthropicBill.url,
      OPENAI_ADMIN_KEY: OPENAI_ADMIN,
      ANTHROPIC_ADMIN_KEY: ANTHROPIC_ADMIN,
    };
    const json = await runCli(['reconcile', '--day', day(), '--json'], env);
    expect(json.stderr).toBe('');
    const out = JSON.parse(json.stdout) as Reconciliation;
    const oa = out.providers.find((p) => p.provider === 'openai')!;
    expect(oa.tokens.find((t) => t.kind === 'input')!.difference).toBe(2 * OPENAI_CALL.prompt_tokens);
    expect(oa.keys.map((k) => [k.api_key_id, k.fingerprint !== null])).toEqual([
      ['key_A', true],
      ['key_B', false],
    ]);
    const text = await runCli(['reconcile', '--day', day()], env);
    expect(text.stdout).toContain('tokens keyrelay/provider: input 2,400/4,800 +2,400 (50.0%)');
    expect(text.stdout).toMatch(/key_B\s+not linked/);

    await reconcile();
    const metrics = await (await request(`${h.url}/metrics`)).body.text();
    expect(metrics).toContain('keyrelay_reconcile_token_difference{provider="openai",kind="input"} 2400');
    expect(metrics).toContain(
      'keyrelay_reconcile_token_difference{provider="anthropic",kind="cache_write"} 0',
    );
  });

  it('keyrelay reconcile-link ties a key id to the credential given on standard input, by fingerprint only', async () => {
    const env = { KEYRELAY_DATA_DIR: h.dataDir };
    const linked = await runCli(['reconcile-link', 'openai', 'key_B', '--json'], env, `${OPENAI_KEY_B}\n`);
    expect(linked.stderr).toBe('');
    expect(linked.code).toBe(0);
    expect(linked.stdout).not.toContain(OPENAI_KEY_B);
    const made = JSON.parse(linked.stdout) as { fingerprint: string };
    expect(made.fingerprint).toMatch(/^[0-9a-f]{32}$/);
    // The same fingerprint the proxy gives the credential: a call with it now shows under key_B.
    await through(OPENAI_KEY_B).chat.completions.create(ask);
    await h.flushLog();
    expect(await credentials()).toContain(made.fingerprint);
    const keyB = (await reconcile()).providers[0]!.keys.find((k) => k.api_key_id === 'key_B')!;
    expect(keyB.fingerprint).toBe(made.fingerprint);
    expect(keyB.keyrelay!.input_tokens).toBe(OPENAI_CALL.prompt_tokens);
    expect(keyB.agrees).toBe(true);

    const refused = await runCli(['reconcile-link', 'openai', 'key_B', '--fingerprint', OPENAI_KEY_B], env);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('--fingerprint must be a credential fingerprint');
    const empty = await runCli(['reconcile-link', 'openai', 'key_B'], env, '');
    expect(empty.code).toBe(2);
    const unlinked = await runCli(['reconcile-link', 'openai', 'key_B', '--fingerprint', 'none'], env);
    expect(unlinked.stdout).toContain('openai key_B: unlinked');
    expect(unlinked.stdout + unlinked.stderr).not.toContain(OPENAI_KEY_B);
    // Both changes are audited in the owner's organization, with no actor (the CLI's), fingerprints only.
    const entries = (await linkAudit()).filter((e) => e.target === 'openai:key_B');
    expect(entries.map((e) => [e.actor_email, e.before, e.after])).toEqual([
      [null, { fingerprint: null }, { fingerprint: made.fingerprint }],
      [null, { fingerprint: made.fingerprint }, { fingerprint: null }],
    ]);
    expect(JSON.stringify(entries)).not.toContain(OPENAI_KEY_B);
  });

  it('an unlinked key can be linked again and unlinked; bad ids and fingerprints are refused', async () => {
    const linkedTo = (await reconcile()).providers[0]!.keys.find(
      (k) => k.api_key_id === 'key_A',
    )!.fingerprint;
    await link('openai', 'key_A', null);
    const [removed] = (await linkAudit()).filter((e) => e.target === 'openai:key_A').slice(-1);
    expect(removed).toMatchObject({
      actor_email: 'owner@example.com',
      before: { fingerprint: linkedTo },
      after: { fingerprint: null },
    });
    const r = await reconcile();
    expect(r.providers[0]!.keys.find((k) => k.api_key_id === 'key_A')!.fingerprint).toBeNull();
    const bad = await request(`${h.url}/api/console/reconcile/links/openai/key_A`, {
      method: 'PUT',
      headers: { cookie: owner.cookie, origin: h.url, 'content-type': 'application/json' },
      body: JSON.stringify({ fingerprint: OPENAI_KEY_A }),
    });
    expect(bad.statusCode).toBe(400);
    await bad.body.dump();
    const other = await request(`${h.url}/api/console/reconcile/links/gemini/key_A`, {
      method: 'PUT',
      headers: { cookie: owner.cookie, origin: h.url, 'content-type': 'application/json' },
      body: JSON.stringify({ fingerprint: 'a'.repeat(32) }),
    });
    expect(other.statusCode).toBe(400);
    await other.body.dump();
  });
});

describe('usage report fetches: retried, paged, bounded', () => {
  it('a 429 then 200 is retried (Retry-After honoured) and the report read', async () => {
    openaiBill.usageFault = { status: 429, times: 1, retryAfter: '0' };
    openaiBill.usageRequests.length = 0;
    const r = await reconcile();
    expect(r.providers[0]!.usage_error).toBeNull();
    // completions: the 429, then two pages (two lines); embeddings: one empty page.
    const paths = openaiBill.usageRequests.map((q) => new URL(q.url, 'http://x').pathname);
    expect(paths).toEqual([
      '/v1/organization/usage/completions',
      '/v1/organization/usage/completions',
      '/v1/organization/usage/embeddings',
    ]);
    const q = new URL(openaiBill.usageRequests[1]!.url, 'http://x').searchParams;
    expect(q.getAll('group_by')).toEqual(['model', 'api_key_id']);
    expect(q.get('bucket_width')).toBe('1d');
  });

  it('reads every page of a long report (next_page sent back as page)', async () => {
    openaiBill.pageSize = 1;
    openaiBill.usageRequests.length = 0;
    const r = await reconcile();
    expect(r.providers[0]!.usage_error).toBeNull();
    const pages = openaiBill.usageRequests
      .filter((q) => q.url.includes('/completions'))
      .map((q) => new URL(q.url, 'http://x').searchParams.get('page'));
    expect(pages).toHaveLength(2);
    expect(pages[0]).toBeNull();
    expect(pages[1]).toMatch(/^page_/);
    expect(anthropicBill.usageRequests.length).toBeGreaterThan(0);
    const aq = new URL(anthropicBill.usageRequests.at(-1)!.url, 'http://x').searchParams;
    expect(aq.getAll('group_by[]')).toEqual(['model', 'api_key_id']);
    expect(anthropicBill.usageRequests.at(-1)!.headers['anthropic-version']).toBe('2023-06-01');
  });

  it('500s to exhaustion end with a clear message, bounded, and the bill is still compared', async () => {
    anthropicBill.usageFault = { status: 500, message: 'Internal server error' };
    anthropicBill.usageRequests.length = 0;
    const started = Date.now();
    const r = await reconcile();
    expect(Date.now() - started).toBeLessThan(5_000);
    const an = r.providers.find((p) => p.provider === 'anthropic')!;
    expect(an.usage_error).toBe(
      "Anthropic's usage report failed after 3 tries: HTTP 500: Internal server error",
    );
    expect(anthropicBill.usageRequests).toHaveLength(3);
    expect(an.error).toBeNull();
    expect(an.tokens).toEqual([]);
    expect(an.keys).toEqual([]);
  });

  it('a usage report that pages forever is cut at the page bound', async () => {
    openaiBill.usageFault = { endless: true };
    openaiBill.usageRequests.length = 0;
    const r = await reconcile();
    expect(r.providers[0]!.usage_error).toBe(
      "OpenAI's usage report (completions) did not end after 6 pages (has_more stayed true)",
    );
    expect(openaiBill.usageRequests).toHaveLength(6);
  });

  it('a report that keeps failing is cut at the whole read’s deadline, and the proxy keeps serving', async () => {
    // Each try waits out a long Retry-After; the read's 5 s deadline ends it before the tries do.
    anthropicBill.usageFault = { status: 503, retryAfter: '3', message: 'overloaded' };
    const started = Date.now();
    const pending = reconcile();
    const answer = await through(OPENAI_KEY_A).chat.completions.create(ask);
    expect(answer.choices.length).toBeGreaterThan(0);
    const r = await pending;
    expect(Date.now() - started).toBeLessThan(6_000);
    expect(r.providers.find((p) => p.provider === 'anthropic')!.usage_error).toBe(
      "Anthropic's usage report did not finish within 5 s (last: HTTP 503: overloaded)",
    );
  });
});
