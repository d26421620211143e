/** The keyrelay command, run as an operator runs it, against a fresh data directory. */
import { mkdtempSync, rmSync } from 'node:fs';
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
