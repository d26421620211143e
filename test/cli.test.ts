/** The keyrelay command, run as an operator runs it, against a fresh data directory. */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KEY_PATTERN } from '../src/keys/format.js';
import { startFakeOpenAI, type FakeUpstream } from './fakes/index.js';
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

  it('refuses to start with an invalid setting, naming the variable', async () => {
    const r = await runCli(['serve'], { ...env, KEYRELAY_PORT: 'eighty' });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('KEYRELAY_PORT');
    const u = await runCli(['serve'], { ...env, KEYRELAY_OPENAI_UPSTREAM: 'https://api.openai.com/v1' });
    expect(u.stderr).toContain('KEYRELAY_OPENAI_UPSTREAM');
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
    ];
    for (const [args, message] of cases) {
      const r = await runCli(args, env);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr, args.join(' ')).toContain(message);
      expect(r.stderr).not.toMatch(/ERR_PARSE|ambiguous|TypeError|at .*\.js:\d+/);
    }
  }, 120_000);

  it('sets and shows the hard budget, tpm, in-flight and rpm-scope limits', async () => {
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
    ]);
    expect(set).toMatchObject({
      budget_usd: 5,
      budget_mode: 'hard',
      rate_limit_tpm: 90_000,
      max_concurrent: 3,
      rate_limit_rpm: 60,
      rate_limit_scope: 'all',
    });
    const shown = await runCli(['keys', 'limits', k.id, '--tpm', 'none', '--max-concurrent', 'none'], env);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toContain('rpm 60 (all)  tpm unlimited  in-flight unlimited  budget $5/month hard');
    const bad = await runCli(['keys', 'limits', k.id, '--budget-mode', 'strict'], env);
    expect([bad.code, bad.stderr.includes('--budget-mode must be soft or hard')]).toEqual([2, true]);
    const zero = await runCli(['keys', 'limits', k.id, '--max-concurrent', '0'], env);
    expect([zero.code, zero.stderr.includes('--max-concurrent must be "none" or an integer')]).toEqual([
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

describe('keyrelay serve and V8', () => {
  /**
   * What serve asks of V8, seen from inside its process: a preload wraps node:v8's setFlagsFromString.
   * What turning pretenuring off does to a proxy's GC is measured by the bench (src/cli/v8-policy.ts).
   */
  it('turns allocation-site pretenuring off, and KEYRELAY_V8_PRETENURING=true keeps it', async () => {
    const preload = join(dataDir, 'v8-flags.cjs');
    writeFileSync(
      preload,
      `const v8 = require('node:v8');
const set = v8.setFlagsFromString;
v8.setFlagsFromString = (flags) => { process.stderr.write('v8 flags: ' + flags + '\\n'); return set(flags); };
require('node:module').syncBuiltinESMExports();
`,
    );
    const flagsSet = async (extra: Record<string, string>): Promise<string[]> => {
      const kr = await startServeProcess({ ...env, ...extra, NODE_OPTIONS: `--require ${preload}` });
      kr.child.kill('SIGTERM');
      expect(await kr.exited, kr.output()).toBe(0);
      return [...kr.output().matchAll(/^v8 flags: (.*)$/gm)].map((m) => m[1]!);
    };
    const shipped = await flagsSet({});
    expect(shipped).toContain('--no-allocation-site-pretenuring');
    const kept = await flagsSet({ KEYRELAY_V8_PRETENURING: 'true' });
    expect(kept).toContain('--allocation-site-pretenuring');
    expect(kept).not.toContain('--no-allocation-site-pretenuring');
  }, 60_000);
});
