/** The keyrelay command, run as an operator runs it, against a fresh data directory. */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KEY_PATTERN } from '../src/keys/format.js';
import { startFakeOpenAI, type FakeUpstream } from './fakes/index.js';
import { startEarlyInAMinute } from './helpers/minute.js';
import { runCli, startServeProcess } from './helpers/process.js';

let dataDir: string;
let env: Record<string, string>;
let openai: FakeUpstream;

beforeAll(async () => {
  openai = await startFakeOpenAI();
  dataDir = mkdtempSync(join(tmpdir(), 'keyrelay-cli-'));
  env = { KEYRELAY_DATA_DIR: dataDir, KEYRELAY_OPENAI_UPSTREAM: openai.url, KEYRELAY_LOG_LEVEL: 'warn' };
});
afterAll(async () => {
  await openai.close();
  rmSync(dataDir, { recursive: true, force: true });
});

const json = async (args: string[]): Promise<unknown> => {
  const r = await runCli([...args, '--json'], env);
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout) as unknown;
};

describe('keyrelay CLI', () => {
  it('migrate creates the schema', async () => {
    const r = await runCli(['migrate'], env);
    expect(r.code).toBe(0);
  });

  it('users create prints the account and its default key as JSON', async () => {
    const out = (await json([
      'users',
      'create',
      '--email',
      'Ops@Example.com',
      '--password',
      'correct horse battery',
    ])) as {
      account: { id: string; email: string };
      key: { id: string; name: string; hint: string; key: string };
    };
    expect(Object.keys(out)).toEqual(['account', 'key']);
    expect(Object.keys(out.account).sort()).toEqual(['email', 'id']);
    expect(out.account.email).toBe('ops@example.com');
    expect(Object.keys(out.key).sort()).toEqual(['hint', 'id', 'key', 'name']);
    expect(out.key.name).toBe('default');
    expect(out.key.key).toMatch(KEY_PATTERN);
    expect(out.key.hint).toBe(`${out.key.key.slice(0, 7)}…${out.key.key.slice(-4)}`);
  });

  it('keys create, list and revoke by id and by full key', async () => {
    const created = (await json(['keys', 'create', '--email', 'ops@example.com', '--name', 'ci'])) as Record<
      string,
      unknown
    >;
    expect(created).toMatchObject({ name: 'ci', status: 'active' });
    expect(created.key).toMatch(KEY_PATTERN);
    const list = (await json(['keys', 'list', '--email', 'ops@example.com'])) as Record<string, unknown>[];
    expect(list.map((k) => k.name).sort()).toEqual(['ci', 'default']);
    for (const k of list) expect(k).not.toHaveProperty('key');
    const byId = (await json(['keys', 'revoke', String(created.id)])) as Record<string, unknown>;
    expect(byId).toMatchObject({ id: created.id, status: 'revoked' });
    const another = (await json(['keys', 'create', '--email', 'ops@example.com'])) as Record<string, unknown>;
    const byKey = (await json(['keys', 'revoke', String(another.key)])) as Record<string, unknown>;
    expect(byKey).toMatchObject({ id: another.id, status: 'revoked' });
  });

  it('orgs and members: create, list as JSON, add with a role, a key in the organization, remove revokes it', async () => {
    await json(['users', 'create', '--email', 'dev@example.com', '--password', 'correct horse battery']);
    const org = (await json(['orgs', 'create', '--email', 'ops@example.com', '--name', 'Platform'])) as {
      id: string;
    };
    const orgs = (await json(['orgs', 'list', '--email', 'ops@example.com'])) as {
      id: string;
      role: string;
    }[];
    expect(orgs.map((o) => [o.id === org.id, o.role])).toEqual([
      [false, 'owner'],
      [true, 'owner'],
    ]);
    // Not a member yet: no key there.
    const refused = await runCli(['keys', 'create', '--email', 'dev@example.com', '--org', org.id], env);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('No such member');
    await json(['members', 'add', '--org', org.id, '--email', 'dev@example.com', '--role', 'member']);
    const members = (await json(['members', 'list', '--org', org.id])) as { email: string; role: string }[];
    expect(members.map((m) => [m.email, m.role])).toEqual([
      ['ops@example.com', 'owner'],
      ['dev@example.com', 'member'],
    ]);
    const key = (await json([
      'keys',
      'create',
      '--email',
      'dev@example.com',
      '--org',
      org.id,
      '--name',
      'svc',
    ])) as {
      id: string;
      org_id: string;
      account_id: string;
    };
    expect(key.org_id).toBe(org.id);
    // Limits across the member's keys: set, shown (as JSON and as text), cleared one by one; bad input refused.
    const limited = (await json([
      'members',
      'limits',
      '--org',
      org.id,
      '--email',
      'dev@example.com',
      '--rpm',
      '30',
      '--budget-usd',
      '12.5',
      '--budget-period',
      'day',
      '--budget-mode',
      'hard',
    ])) as { limits: unknown; budget: { spent_usd: number; budget_usd: number } };
    expect(limited.limits).toEqual({
      rate_limit_rpm: 30,
      budget_usd: 12.5,
      budget_period: 'day',
      budget_mode: 'hard',
    });
    expect(limited.budget).toMatchObject({ spent_usd: 0, budget_usd: 12.5 });
    const shown = await runCli(['members', 'limits', '--org', org.id, '--email', 'dev@example.com'], env);
    expect(shown.stdout).toContain('rpm 30, budget $12.5/day (hard)');
    const cleared = (await json([
      'members',
      'limits',
      '--org',
      org.id,
      '--email',
      'dev@example.com',
      '--rpm',
      'none',
    ])) as {
      limits: { rate_limit_rpm: number | null; budget_usd: number };
    };
    expect(cleared.limits).toMatchObject({ rate_limit_rpm: null, budget_usd: 12.5 });
    const tpm = await runCli(
      ['members', 'limits', '--org', org.id, '--email', 'dev@example.com', '--tpm', '5'],
      env,
    );
    expect(tpm.code).toBe(2);
    const tiny = await runCli(
      ['members', 'limits', '--org', org.id, '--email', 'dev@example.com', '--budget-usd', '0.001'],
      env,
    );
    expect(tiny.code).not.toBe(0);
    expect(tiny.stderr).toContain('--budget-usd must be');
    const removed = (await json(['members', 'remove', '--org', org.id, '--email', 'dev@example.com'])) as {
      revoked: string[];
    };
    expect(removed.revoked).toEqual([key.id]);
    const bad = await runCli(
      ['members', 'add', '--org', org.id, '--email', 'dev@example.com', '--role', 'boss'],
      env,
    );
    expect(bad.code).toBe(2);
    const lastOwner = await runCli(['members', 'remove', '--org', org.id, '--email', 'ops@example.com'], env);
    expect(lastOwner.code).toBe(1);
    expect(lastOwner.stderr).toContain('at least one owner');
  });

  it('service keys: made by an owner or admin, listed by organization, left alone when their creator goes', async () => {
    for (const email of ['boss@example.com', 'lead@example.com', 'dev2@example.com'])
      await json(['users', 'create', '--email', email, '--password', 'correct horse battery']);
    const org = (await json(['orgs', 'create', '--email', 'boss@example.com', '--name', 'Svc'])) as {
      id: string;
    };
    await json(['members', 'add', '--org', org.id, '--email', 'lead@example.com', '--role', 'admin']);
    await json(['members', 'add', '--org', org.id, '--email', 'dev2@example.com', '--role', 'member']);
    const refused = await runCli(
      ['keys', 'create', '--email', 'dev2@example.com', '--org', org.id, '--service'],
      env,
    );
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('dev2@example.com is member');
    const svc = (await json([
      'keys',
      'create',
      '--email',
      'lead@example.com',
      '--org',
      org.id,
      '--service',
    ])) as {
      id: string;
      name: string;
      service: boolean;
      key: string;
    };
    expect(svc).toMatchObject({ name: 'service', service: true });
    expect(svc.key).toMatch(KEY_PATTERN);
    const held = (await json(['keys', 'create', '--email', 'lead@example.com', '--org', org.id])) as {
      id: string;
      service: boolean;
    };
    expect(held.service).toBe(false);
    const listed = (await json(['keys', 'list', '--org', org.id])) as { id: string; service: boolean }[];
    expect(listed.map((k) => [k.id, k.service]).sort()).toEqual(
      [
        [svc.id, true],
        [held.id, false],
      ].sort(),
    );
    expect((await runCli(['keys', 'list', '--org', org.id], env)).stdout).toMatch(/service\s+created/);
    const removed = (await json(['members', 'remove', '--org', org.id, '--email', 'lead@example.com'])) as {
      revoked: string[];
    };
    expect(removed.revoked).toEqual([held.id]);
    const after = (await json(['keys', 'list', '--org', org.id])) as { id: string; status: string }[];
    expect(after.find((k) => k.id === svc.id)?.status).toBe('active');
  });

  it('orgs audit-retention shows and sets how long an organization keeps its audit entries', async () => {
    await json(['users', 'create', '--email', 'auditor@example.com', '--password', 'correct horse battery']);
    const org = (await json(['orgs', 'create', '--email', 'auditor@example.com', '--name', 'Audited'])) as {
      id: string;
    };
    expect(await json(['orgs', 'audit-retention', '--org', org.id])).toEqual({
      org_id: org.id,
      audit_retention_days: null,
    });
    expect(await json(['orgs', 'audit-retention', '--org', org.id, '--days', '90'])).toEqual({
      org_id: org.id,
      audit_retention_days: 90,
    });
    const text = await runCli(['orgs', 'audit-retention', '--org', org.id], env);
    expect(text.stdout).toContain('for 90 days');
    for (const bad of ['0', '3651', '1.5', 'forever']) {
      const r = await runCli(['orgs', 'audit-retention', '--org', org.id, '--days', bad], env);
      expect(r.code).toBe(2);
    }
    expect(await json(['orgs', 'audit-retention', '--org', org.id, '--days', 'off'])).toEqual({
      org_id: org.id,
      audit_retention_days: null,
    });
  });

  it('requests list shows the newest rows first with the log’s field names', async () => {
    const user = (await json([
      'users',
      'create',
      '--email',
      'req@example.com',
      '--password',
      'correct horse battery',
    ])) as {
      key: { key: string };
    };
    const kr = await startServeProcess(env);
    for (const model of ['gpt-4o-mini', 'gpt-4o']) {
      const res = await request(`${kr.url}/api/proxy/openai/v1/chat/completions`, {
        method: 'POST',
        headers: {
          'proxy-api-key': user.key.key,
          authorization: 'Bearer sk-x',
          'content-type': 'application/json',
        },
        body: JSON.stringify({ model, messages: [] }),
      });
      await res.body.dump();
    }
    kr.child.kill('SIGTERM');
    expect(await kr.exited).toBe(0);
    const rows = (await json(['requests', 'list', '--email', 'req@example.com', '--limit', '5'])) as Record<
      string,
      unknown
    >[];
    expect(rows.map((r) => r.model)).toEqual(['gpt-4o', 'gpt-4o-mini']);
    expect(rows[0]).toMatchObject({
      provider: 'openai',
      status: 200,
      outcome: 'ok',
      input_tokens: 11,
      output_tokens: 7,
    });
    for (const f of [
      'id',
      'created_at',
      'key_id',
      'account_id',
      'latency_ms',
      'ttfb_ms',
      'usage_source',
      'cost_usd',
      'price_source',
    ]) {
      expect(rows[0]).toHaveProperty(f);
    }
    const all = (await json(['requests', 'list', '--limit', '1'])) as unknown[];
    expect(all).toHaveLength(1);
  }, 90_000);

  it('prices lists the unpriced models and the fees left out of partial costs, with counts', async () => {
    const user = (await json([
      'users',
      'create',
      '--email',
      'prices@example.com',
      '--password',
      'correct horse battery',
    ])) as { key: { key: string } };
    const kr = await startServeProcess(env);
    const post = async (path: string, body: unknown, headers: Record<string, string> = {}) => {
      const res = await request(`${kr.url}/api/proxy/openai/v1${path}`, {
        method: 'POST',
        headers: {
          'proxy-api-key': user.key.key,
          authorization: 'Bearer sk-x',
          'content-type': 'application/json',
          ...headers,
        },
        body: JSON.stringify(body),
      });
      expect(res.statusCode).toBe(200);
      await res.body.dump();
    };
    const draw = { model: 'gpt-4o', input: 'draw', tools: [{ type: 'image_generation' }] };
    await post('/responses', draw, { 'x-fake-tool-calls': '2' });
    await post('/responses', draw, { 'x-fake-tool-calls': '3' });
    await post('/chat/completions', { model: 'gpt-9-unknown', messages: [] });
    await post('/chat/completions', { model: 'gpt-4o', messages: [] }); // priced in full: not listed
    kr.child.kill('SIGTERM');
    expect(await kr.exited).toBe(0);

    const gaps = (await json(['prices'])) as {
      price_library: string;
      unpriced: unknown[];
      partial: unknown[];
    };
    expect(gaps.price_library).toMatch(/^genai-prices@\d/);
    expect(gaps.unpriced).toEqual([
      {
        provider: 'openai',
        model: 'gpt-9-unknown',
        reason: `${gaps.price_library} has no price for gpt-9-unknown`,
        requests: 1,
      },
    ]);
    expect(gaps.partial).toEqual([
      { provider: 'openai', model: 'gpt-4o', fee: 'image_generations', requests: 2, uses: 5 },
    ]);
    const text = await runCli(['prices'], env);
    expect(text.stdout).toMatch(/gpt-9-unknown +1 requests/);
    expect(text.stdout).toMatch(/gpt-4o +image_generations +2 requests +5 uses/);
    const before = (await json(['prices', '--to', '2020-01-01', '--from', '2019-12-01'])) as {
      unpriced: unknown[];
    };
    expect(before.unpriced).toEqual([]);
    const wrong = await runCli(['prices', '--from', 'yesterday'], env);
    expect(wrong.code).toBe(2);
  }, 90_000);

  it('settings: the private-target allowance for alerts is read and set, nothing else', async () => {
    expect(await json(['settings', 'get', 'alerts_allow_private_targets'])).toEqual({
      name: 'alerts_allow_private_targets',
      value: 'false',
    });
    await json(['settings', 'set', 'alerts_allow_private_targets', 'true']);
    const { openStores } = await import('../src/store/factory.js');
    const { loadConfig } = await import('../src/config.js');
    const stores = await openStores(loadConfig({}, env));
    try {
      expect(await stores.configStore.getSetting('alerts_allow_private_targets')).toBe('true');
    } finally {
      await stores.logStore.close();
      await stores.configStore.close();
    }
    const bad = await runCli(['settings', 'set', 'alerts_allow_private_targets', 'yes'], env);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('must be one of true, false');
    const unknown = await runCli(['settings', 'set', 'signup_policy', 'open'], env);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('unknown setting signup_policy');
    expect((await runCli(['settings', 'set', 'alerts_allow_private_targets'], env)).code).toBe(2);
  });

  it('alerts list shows an organization’s rules without their secrets, and its deliveries', async () => {
    const org = (await json(['orgs', 'create', '--email', 'dev@example.com', '--name', 'Alerted'])) as {
      id: string;
    };
    expect(await json(['alerts', 'list', '--org', org.id])).toEqual({ rules: [], deliveries: [] });
    const { openStores } = await import('../src/store/factory.js');
    const { loadConfig } = await import('../src/config.js');
    const stores = await openStores(loadConfig({}, env));
    try {
      await stores.configStore.createAlertRule({
        id: 'rule-1',
        org_id: org.id,
        name: 'monthly',
        scope: 'org',
        scope_id: null,
        kind: 'budget',
        params: { budget_usd: 5, period: 'month', thresholds: [80] },
        url: 'https://203.0.114.10/hook',
        format: 'json',
        secret: 'whsec_never_printed',
        enabled: true,
        created_at: new Date().toISOString(),
        created_by: org.id,
      });
    } finally {
      await stores.logStore.close();
      await stores.configStore.close();
    }
    const listed = (await json(['alerts', 'list', '--org', org.id])) as { rules: Record<string, unknown>[] };
    expect(listed.rules).toEqual([
      expect.objectContaining({ id: 'rule-1', name: 'monthly', kind: 'budget' }),
    ]);
    const text = await runCli(['alerts', 'list', '--org', org.id], env);
    expect(text.stdout).toContain(
      'rule-1  on   budget      org  monthly  -> https://203.0.114.10/hook (json)',
    );
    expect(text.stdout + JSON.stringify(listed)).not.toContain('whsec_never_printed');
  });

  it('refuses to start with an invalid setting, naming the variable', async () => {
    const r = await runCli(['serve'], { ...env, KEYRELAY_PORT: 'eighty' });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('KEYRELAY_PORT');
    const u = await runCli(['serve'], { ...env, KEYRELAY_OPENAI_UPSTREAM: 'https://api.openai.com/v1' });
    expect(u.stderr).toContain('KEYRELAY_OPENAI_UPSTREAM');
  });

  it('refuses to start with malformed OpenTelemetry headers, naming the variable but not the secret', async () => {
    const r = await runCli(['serve'], {
      ...env,
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318',
      OTEL_EXPORTER_OTLP_HEADERS: 'x-tenant=a,Authorization Bearer s3cret-token',
    });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('OTEL_EXPORTER_OTLP_HEADERS: entry 2 is not name=value');
    expect(r.stderr).not.toContain('s3cret-token');
  });
});

describe('keyrelay CLI, as a well-made command', () => {
  it('answers --help for every command and command group with exit 0', async () => {
    for (const args of [
      ['--help'],
      ['serve', '--help'],
      ['migrate', '--help'],
      ['users', '--help'],
      ['users', 'create', '--help'],
      ['keys', '--help'],
      ['keys', 'create', '-h'],
      ['keys', 'list', '--help'],
      ['keys', 'limits', '--help'],
      ['keys', 'revoke', '--help'],
      ['requests', 'list', '--help'],
    ]) {
      const r = await runCli(args, env);
      expect(r.code, args.join(' ')).toBe(0);
      expect(r.stdout, args.join(' ')).toMatch(/^usage: keyrelay /);
    }
  }, 120_000);

  it('lists a group’s commands when given the group alone, as a usage error (exit 2)', async () => {
    const r = await runCli(['keys'], env);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('"keys" needs a command');
    for (const sub of ['create', 'list', 'limits', 'revoke']) expect(r.stderr).toContain(`keys ${sub}`);
  });

  it('says what is wrong with a command line in the user’s terms, always with exit 2', async () => {
    const cases: [string[], string][] = [
      [[], 'no command given'],
      [['frobnicate'], 'unknown command "frobnicate"'],
      [['requests', 'list', '--limit', '-3'], '--limit must be a whole number from 1 to 10000 (got -3)'],
      [['requests', 'list', '--bogus'], 'unknown option --bogus'],
      [['keys', 'list', '--email'], '--email needs a value'],
      [['keys', 'list', '--limit', '3', '--email', 'ops@example.com'], 'keys list does not take --limit'],
      [['keys', 'revoke'], 'give the key'],
      [['keys', 'create'], '--email is required'],
      [['keys', 'create', '--email', 'ops@example.com', '--rpm', '1.5'], '--rpm must be a whole number'],
      [
        ['keys', 'create', '--email', 'ops@example.com', '--rpm', '-5'],
        '--rpm must be more than 0, or "none" (got -5)',
      ],
      [
        ['keys', 'create', '--email', 'ops@example.com', '--budget-usd', '-1'],
        '--budget-usd must be more than 0',
      ],
    ];
    for (const [args, message] of cases) {
      const r = await runCli(args, env);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr, args.join(' ')).toContain(message);
      expect(r.stderr).not.toMatch(/ERR_PARSE|ambiguous|TypeError|at .*\.js:\d+/);
    }
  }, 120_000);

  it('sets and shows the hard budget (its unpriced calls too), tpm, in-flight and rpm-scope limits', async () => {
    const k = (await json(['keys', 'create', '--email', 'ops@example.com', '--name', 'hard'])) as {
      id: string;
    };
    const set = await json([
      'keys',
      'limits',
      k.id,
      '--budget-usd',
      '5',
      '--budget-mode',
      'hard',
      '--tpm',
      '90000',
      '--max-concurrent',
      '3',
      '--rpm',
      '60',
      '--rpm-scope',
      'all',
      '--budget-unpriced',
      'allow',
    ]);
    expect(set).toMatchObject({
      budget_usd: 5,
      budget_mode: 'hard',
      budget_unpriced: 'allow',
      rate_limit_tpm: 90_000,
      max_concurrent: 3,
      rate_limit_rpm: 60,
      rate_limit_scope: 'all',
    });
    const shown = await runCli(['keys', 'limits', k.id, '--tpm', 'none', '--max-concurrent', 'none'], env);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toContain(
      'rpm 60 (all)  tpm unlimited  in-flight unlimited  budget $5/month hard (unpriced: allow)',
    );
    // A key's allowlist may name the deployment's named upstreams, and only those it has.
    const withUpstreams = {
      ...env,
      KEYRELAY_UPSTREAMS: JSON.stringify({
        openrouter: { shape: 'openai', origin: 'https://openrouter.ai' },
      }),
    };
    const routed = await runCli(
      ['keys', 'limits', k.id, '--providers', 'openai,openrouter', '--json'],
      withUpstreams,
    );
    expect([
      routed.code,
      (JSON.parse(routed.stdout) as { allowed_providers: string[] }).allowed_providers,
    ]).toEqual([0, ['openai', 'openrouter']]);
    const unknown = await runCli(['keys', 'limits', k.id, '--providers', 'openrouter'], env);
    expect([unknown.code, unknown.stderr.includes('--providers must be "none" or a non-empty list')]).toEqual(
      [2, true],
    );
    await runCli(['keys', 'limits', k.id, '--providers', 'none'], env);
    const unpricedBad = await runCli(['keys', 'limits', k.id, '--budget-unpriced', 'maybe'], env);
    expect([
      unpricedBad.code,
      unpricedBad.stderr.includes('--budget-unpriced must be refuse or allow'),
    ]).toEqual([2, true]);
    // keys list shows each key's limits, and its budget's spend and reset, beside the key.
    const listed = await runCli(['keys', 'list', '--email', 'ops@example.com'], env);
    const block = listed.stdout.slice(listed.stdout.indexOf(k.id));
    expect(block).toContain('  limits  providers any  models any  rpm 60 (all)  tpm unlimited');
    expect(block).toMatch(
      /\n {2}budget {2}spent \$0 of \$5 \(0%\), resets in \d+ (d|h|min|s)( \d+ (h|min|s))? \(20\d\d-/,
    );
    const bad = await runCli(['keys', 'limits', k.id, '--budget-mode', 'strict'], env);
    expect([bad.code, bad.stderr.includes('--budget-mode must be soft or hard')]).toEqual([2, true]);
    const zero = await runCli(['keys', 'limits', k.id, '--max-concurrent', '0'], env);
    expect([zero.code, zero.stderr.includes('--max-concurrent must be "none" or an integer')]).toEqual([
      2,
      true,
    ]);
  });

  it('sets, shows and clears the caps per end user', async () => {
    const k = (await json(['keys', 'create', '--email', 'ops@example.com', '--name', 'per-user'])) as {
      id: string;
    };
    const set = await json([
      'keys',
      'limits',
      k.id,
      '--user-rpm',
      '20',
      '--user-budget-usd',
      '1.5',
      '--user-budget-period',
      'day',
      '--user-budget-mode',
      'hard',
    ]);
    expect(set).toMatchObject({
      user_rate_limit_rpm: 20,
      user_budget_usd: 1.5,
      user_budget_period: 'day',
      user_budget_mode: 'hard',
      budget_usd: null,
    });
    const shown = await runCli(['keys', 'limits', k.id, '--user-rpm', 'none'], env);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toContain('per end user: rpm unlimited, budget $1.5/day hard');
    const cleared = await json(['keys', 'limits', k.id, '--user-budget-usd', 'none']);
    expect(cleared).toMatchObject({
      user_rate_limit_rpm: null,
      user_budget_usd: null,
      user_budget_period: null,
    });
    const bad = await runCli(['keys', 'limits', k.id, '--user-rpm', '0'], env);
    expect([bad.code, bad.stderr.includes('--user-rpm must be "none" or an integer')]).toEqual([2, true]);
    const mode = await runCli(['keys', 'limits', k.id, '--user-budget-mode', 'strict'], env);
    expect([mode.code, mode.stderr.includes('--user-budget-mode must be soft or hard')]).toEqual([2, true]);
    const period = await runCli(['keys', 'limits', k.id, '--user-budget-period', 'day'], env);
    expect([period.code, period.stderr.includes('--user-budget-period needs a --user-budget-usd')]).toEqual([
      2,
      true,
    ]);
  });

  it('answers an out-of-range limit with the flag’s name, not the API field', async () => {
    const k = (await json(['keys', 'create', '--email', 'ops@example.com', '--name', 'rpm'])) as {
      id: string;
    };
    const r = await runCli(['keys', 'limits', k.id, '--rpm', '0'], env);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--rpm must be "none" or an integer');
    expect(r.stderr).not.toContain('rate_limit_rpm');
    const missing = await runCli(['keys', 'revoke', 'no-such-id'], env);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('no key with id no-such-id');
  });

  it('refuses to create a database anywhere but serve and migrate (a mistyped --data-dir)', async () => {
    const typo = join(dataDir, 'dta');
    const r = await runCli(['keys', 'list', '--email', 'ops@example.com', '--data-dir', typo], env);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`no keyrelay database in ${typo}`);
    expect(existsSync(typo)).toBe(false);
  });
});

describe('keyrelay serve output', () => {
  it('prints a banner with the address, console URL, data directory and stores when pretty', async () => {
    const kr = await startServeProcess({ ...env, KEYRELAY_LOG_FORMAT: 'pretty' });
    kr.child.kill('SIGTERM');
    expect(await kr.exited, kr.output()).toBe(0);
    const out = kr.output();
    expect(out).toContain(`keyrelay is listening on ${kr.url}`);
    expect(out).toMatch(/console\s+http:\/\/127\.0\.0\.1:\d+\//);
    expect(out).toContain(`SQLite in ${dataDir}`);
    expect(out).toMatch(/redis\s+not used/);
    expect(out).not.toContain('{"level"');
  }, 60_000);

  it('logs JSON lines when not on a terminal, with console files at debug only', async () => {
    for (const level of ['info', 'debug']) {
      const kr = await startServeProcess({ ...env, KEYRELAY_LOG_LEVEL: level });
      for (const path of ['/favicon.svg', '/keys', '/api/console/info']) {
        const res = await request(`${kr.url}${path}`);
        await res.body.dump();
      }
      kr.child.kill('SIGTERM');
      expect(await kr.exited).toBe(0);
      const lines = kr
        .output()
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as { msg: string; req?: { url: string }; console?: string });
      // Started on port 0: the console's address is the port bound, not ":0".
      expect(lines.find((l) => l.msg === 'keyrelay listening')?.console).toBe(kr.url);
      const urls = lines.filter((l) => l.msg === 'request').map((l) => l.req!.url);
      expect(urls, level).toContain('/api/console/info');
      if (level === 'info') expect(urls).not.toContain('/favicon.svg');
      else expect(urls).toEqual(expect.arrayContaining(['/favicon.svg', '/keys']));
    }
  }, 60_000);
});

describe('keyrelay serve with the request log off', () => {
  /**
   * A period's spend before an instance first sees a key comes from the request log (docs/limits.md). With
   * the log off there are no rows: each key's hourly spend is kept instead (src/log/spend-rollup.ts), or a
   * restart without Redis forgot what keys spent and admitted a spent budget again (it did, before). The
   * same run with the log on is the control.
   */
  it('keeps what keys spent across a restart, with the log off as with it on', async () => {
    const admitted: Record<string, number[]> = {};
    for (const log of ['false', 'true']) {
      const dir = mkdtempSync(join(tmpdir(), 'keyrelay-cli-nolog-'));
      const e = { ...env, KEYRELAY_DATA_DIR: dir, KEYRELAY_REQUEST_LOG: log };
      try {
        expect((await runCli(['migrate'], e)).code).toBe(0);
        const created = await runCli(
          ['users', 'create', '--email', 'b@example.com', '--password', 'correct horse battery', '--json'],
          e,
        );
        const k = (JSON.parse(created.stdout) as { key: { id: string; key: string } }).key;
        const limits = ['keys', 'limits', k.id, '--budget-usd', '0.04', '--budget-mode', 'hard'];
        expect((await runCli(limits, e)).code).toBe(0);
        // The fake bills 10,000 input tokens of gpt-4o a call: $0.025. A hard budget reserves each call's
        // upper bound (tiny: a short prompt, max_tokens 1) against the spend so far, and its first call in
        // a period waits for that spend to be loaded: two calls pass ($0.05), the third is refused.
        const untilRefused = async (url: string): Promise<number> => {
          for (let n = 0; n < 6; n++) {
            const res = await request(`${url}/api/proxy/openai/v1/chat/completions`, {
              method: 'POST',
              headers: {
                'proxy-api-key': k.key,
                'content-type': 'application/json',
                'x-fake-usage': '{"prompt_tokens":10000}',
              },
              body: JSON.stringify({
                model: 'gpt-4o',
                max_tokens: 1,
                messages: [{ role: 'user', content: 'hi' }],
              }),
            });
            await res.body.dump();
            if (res.statusCode === 429) return n;
            expect(res.statusCode).toBe(200);
          }
          return Infinity;
        };
        for (let start = 0; start < 2; start++) {
          const kr = await startServeProcess(e);
          try {
            (admitted[log] ??= []).push(await untilRefused(kr.url));
          } finally {
            kr.child.kill('SIGTERM');
            expect(await kr.exited).toBe(0);
          }
          expect(kr.output(), `log ${log}`).not.toMatch(/key spend (write failed|could not be written)/);
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }
    // The second start knows the $0.05 either way, and refuses the first call.
    expect(admitted).toEqual({ false: [2, 0], true: [2, 0] });
  }, 90_000);
});

describe('keys list and rate limits', () => {
  /**
   * The rpm and tpm counts live in the serving instances (docs/limits.md): with Redis, keys list reads every
   * instance's totals, as the console does; without it, it says where they are instead of showing none.
   */
  it('shows each rate limit’s use in the last minute and when it frees, read from Redis', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keyrelay-cli-rates-'));
    const e = { ...env, KEYRELAY_DATA_DIR: dir, KEYRELAY_REDIS_URL: 'redis://127.0.0.1:6379' };
    try {
      expect((await runCli(['migrate'], e)).code).toBe(0);
      const created = await runCli(
        ['users', 'create', '--email', 'r@example.com', '--password', 'correct horse battery', '--json'],
        e,
      );
      const k = (JSON.parse(created.stdout) as { key: { id: string; key: string } }).key;
      expect((await runCli(['keys', 'limits', k.id, '--rpm', '3', '--tpm', '100000'], e)).code).toBe(0);
      const kr = await startServeProcess(e);
      try {
        await startEarlyInAMinute();
        const statuses: number[] = [];
        for (let n = 0; n < 4; n++) {
          const res = await request(`${kr.url}/api/proxy/openai/v1/chat/completions`, {
            method: 'POST',
            headers: {
              'proxy-api-key': k.key,
              'content-type': 'application/json',
              'x-fake-usage': '{"prompt_tokens":1000,"completion_tokens":200}',
            },
            body: JSON.stringify({
              model: 'gpt-4o',
              max_tokens: 300,
              messages: [{ role: 'user', content: 'hi' }],
            }),
          });
          await res.body.dump();
          statuses.push(res.statusCode);
        }
        expect(statuses).toEqual([200, 200, 200, 429]);
        // Counts reach Redis with the instance's next sync (every 200 ms).
        let text = '';
        await expect
          .poll(
            async () => {
              text = (await runCli(['keys', 'list', '--email', 'r@example.com'], e)).stdout;
              return text;
            },
            { timeout: 10_000, interval: 300 },
          )
          .toMatch(/tpm 3600 of 100000 used/);
        expect(text).toMatch(
          /\n {2}rate {4}rpm 3 of 3 used in the last minute \(full, one more in (\d+ min )?\d+ s\)/,
        );
        expect(text).toMatch(
          /\n {2}rate {4}tpm 3600 of 100000 used in the last minute \(96400 left, all free in /,
        );
        const listed = JSON.parse(
          (await runCli(['keys', 'list', '--email', 'r@example.com', '--json'], e)).stdout,
        ) as {
          rate_status: { rpm: { used: number; limit: number; frees_at: string | null } } | null;
        }[];
        const rpm = listed[0]!.rate_status!.rpm;
        expect([rpm.used, rpm.limit]).toEqual([3, 3]);
        // The refusal's wait and the listing's agree (give or take the seconds between them).
        const wait = (Date.parse(rpm.frees_at!) - Date.now()) / 1000;
        expect(wait).toBeGreaterThan(0);
        expect(wait).toBeLessThanOrEqual(80);
        const { KEYRELAY_REDIS_URL: _redis, ...withoutRedis } = e;
        const local = (await runCli(['keys', 'list', '--email', 'r@example.com'], withoutRedis)).stdout;
        expect(local).toContain(
          "\n  rate    use counted in each running instance's memory: see the console's Keys page",
        );
      } finally {
        kr.child.kill('SIGTERM');
        expect(await kr.exited).toBe(0);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});

describe('keyrelay serve and V8', () => {
  /**
   * Node's docs warn that changing V8 flags after start can crash or lose data: serve's flags are on the
   * node command line (`npm start`), never set at run time. Seen from inside the process: a preload wraps
   * node:v8's setFlagsFromString.
   */
  it('changes no V8 flag at run time; its flags come from the start command', async () => {
    const preload = join(dataDir, 'v8-flags.cjs');
    writeFileSync(
      preload,
      `const v8 = require('node:v8');
const set = v8.setFlagsFromString;
v8.setFlagsFromString = (flags) => { process.stderr.write('v8 flags: ' + flags + '\\n'); return set(flags); };
require('node:module').syncBuiltinESMExports();
process.stderr.write('exec argv: ' + process.execArgv.join(' ') + '\\n');
process.stderr.write('malloc trim threshold: ' + process.env.MALLOC_TRIM_THRESHOLD_ + '\\n');
`,
    );
    const kr = await startServeProcess({
      ...env,
      KEYRELAY_LOG_LEVEL: 'debug',
      NODE_OPTIONS: `--require ${preload}`,
    });
    // Past the idle reclaim's first collection (at start), which once set a flag for itself.
    await waitForOutput(kr, /"reason":"start".*"msg":"idle memory reclaim"/);
    kr.child.kill('SIGTERM');
    expect(await kr.exited, kr.output()).toBe(0);
    expect(kr.output()).not.toMatch(/^v8 flags:/m);
    expect(kr.output()).toMatch(/^exec argv: .*--expose-gc/m);
    expect(kr.output()).toMatch(/^exec argv: .*--no-allocation-site-pretenuring/m);
    // npm start's variable for glibc's malloc (src/cli/memory.ts), so serve has nothing to say about it.
    expect(kr.output()).toMatch(/^malloc trim threshold: 131072$/m);
    expect(kr.output()).not.toMatch(/glibc keeps freed memory/);
  }, 60_000);

  it("says at start that glibc keeps freed memory when started without npm start's variable", async () => {
    const kr = await startServeProcess(env, { withoutStartEnv: true });
    kr.child.kill('SIGTERM');
    expect(await kr.exited, kr.output()).toBe(0);
    const glibc = (process.report.getReport() as { header: { glibcVersionRuntime?: string } }).header
      .glibcVersionRuntime;
    // Off glibc there is nothing to say; this machine and CI's are Debian, so the line is expected here.
    expect(glibc, 'glibc expected on this machine').toBeDefined();
    expect(kr.output()).toMatch(/glibc keeps freed memory: MALLOC_TRIM_THRESHOLD_ is unset/);
  }, 60_000);

  it('names, once at start, the variables it no longer reads', async () => {
    const kr = await startServeProcess({
      ...env,
      KEYRELAY_LOG_FLUSH_MS: '50',
      KEYRELAY_V8_PRETENURING: 'true',
      KEYRELAY_PROT: '9000',
      KEYRELAY_HARD_BUDGET_UNPRICED: 'allow',
    });
    kr.child.kill('SIGTERM');
    expect(await kr.exited, kr.output()).toBe(0);
    const warnings = kr
      .output()
      .split('\n')
      .filter((l) => l.includes('"variables"'))
      .map((l) => JSON.parse(l) as { msg: string; variables: string[] });
    expect(warnings.map((w) => w.variables)).toEqual([
      ['KEYRELAY_LOG_FLUSH_MS', 'KEYRELAY_V8_PRETENURING'],
      ['KEYRELAY_PROT'],
    ]);
    // A setting that moved is named with where it went.
    const moved = kr
      .output()
      .split('\n')
      .filter((l) => l.includes('"variable"'))
      .map((l) => JSON.parse(l) as { msg: string; variable: string });
    expect(moved.map((w) => w.variable)).toEqual(['KEYRELAY_HARD_BUDGET_UNPRICED']);
    expect(moved[0]!.msg).toContain('keyrelay keys limits --budget-unpriced');
  }, 60_000);
});

async function waitForOutput(kr: { output(): string }, re: RegExp): Promise<void> {
  const until = Date.now() + 30_000;
  while (!re.test(kr.output())) {
    if (Date.now() > until) throw new Error(`no ${re} in:\n${kr.output()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
