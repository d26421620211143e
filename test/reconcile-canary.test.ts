/**
 * The admin keys are the operator's, read from the environment only: a canary key must not appear in the
 * database files, the server's log (at debug), any console or /metrics answer, or the CLI's output, even
 * when the provider's error message (cost report or usage report) echoes it. Nor does the provider
 * credential a call was made with, once its provider key id is linked to it: the link holds the
 * fingerprint only.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { request } from 'undici';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startFakeAnthropic, startFakeOpenAI, type FakeUpstream } from './fakes/index.js';
import { startFakeCostApi, type FakeCostApi } from './fakes/cost-reports.js';
import { runCli, startServeProcess, stopServeProcess } from './helpers/process.js';

const OPENAI_ADMIN = 'sk-admin-CANARYopenaiQ7w3e9r1t5y';
const ANTHROPIC_ADMIN = 'sk-ant-admin01-CANARYanthropicZ8x2c4v6b';
const DAY = '2026-11-21';
const PROVIDER_CREDENTIAL = 'sk-proj-CANARYcredentialM4n7b2v9c1x';

let dataDir: string;
let openai: FakeUpstream;
let anthropic: FakeUpstream;
let openaiBill: FakeCostApi;
let anthropicBill: FakeCostApi;
let env: Record<string, string>;

beforeAll(async () => {
  openai = await startFakeOpenAI();
  anthropic = await startFakeAnthropic();
  openaiBill = await startFakeCostApi('openai', OPENAI_ADMIN);
  anthropicBill = await startFakeCostApi('anthropic', ANTHROPIC_ADMIN);
  openaiBill.forwardTo = openai.url;
  anthropicBill.forwardTo = anthropic.url;
  openaiBill.bills.set(DAY, [{ model: 'gpt-4o-mini', item: 'gpt-4o-mini, input', usd: 0.5 }]);
  openaiBill.usage.set(DAY, [
    { model: 'gpt-4o-mini', api_key_id: 'key_canary', requests: 1, input_tokens: 11, output_tokens: 7 },
  ]);
  // A provider whose refusal repeats the key it was given, on both of its reports.
  anthropicBill.fault = { status: 401, message: `admin key ${ANTHROPIC_ADMIN} is disabled` };
  anthropicBill.usageFault = { status: 403, message: `admin key ${ANTHROPIC_ADMIN} may not read usage` };
  dataDir = mkdtempSync(join(tmpdir(), 'keyrelay-canary-'));
  env = {
    KEYRELAY_DATA_DIR: dataDir,
    KEYRELAY_OPENAI_UPSTREAM: openaiBill.url,
    KEYRELAY_ANTHROPIC_UPSTREAM: anthropicBill.url,
    KEYRELAY_LOG_LEVEL: 'debug',
    OPENAI_ADMIN_KEY: OPENAI_ADMIN,
    ANTHROPIC_ADMIN_KEY: ANTHROPIC_ADMIN,
  };
});
afterAll(async () => {
  await Promise.all([openai.close(), anthropic.close(), openaiBill.close(), anthropicBill.close()]);
  rmSync(dataDir, { recursive: true, force: true });
});

const leaks = (text: string) => [OPENAI_ADMIN, ANTHROPIC_ADMIN].filter((k) => text.includes(k));

it('the admin keys appear in no database file, log line, console or metrics answer, or CLI output', async () => {
  const kr = await startServeProcess(env);
  const answers: string[] = [];
  try {
    const post = (path: string, payload: unknown) =>
      request(`${kr.url}/api/console/${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', origin: kr.url },
        body: JSON.stringify(payload),
      });
    const who = { email: 'op@example.com', password: 'correct horse battery' };
    const signup = await post('signup', who);
    answers.push(await signup.body.text());
    expect(signup.statusCode).toBe(202);
    const login = await post('login', who);
    const signed = (await login.body.json()) as { key: { key: string } };
    answers.push(JSON.stringify(signed));
    expect(login.statusCode).toBe(200);
    const cookie = String(login.headers['set-cookie']).split(';')[0]!;
    const client = new OpenAI({
      apiKey: PROVIDER_CREDENTIAL,
      baseURL: `${kr.url}/api/proxy/openai/v1`,
      defaultHeaders: { 'proxy-api-key': signed.key.key },
    });
    await client.chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'hi' }],
    });

    // The owner links the provider's key id to the credential keyrelay saw (by its fingerprint).
    // The call's row is written behind its answer: the credential shows once the row is in.
    let fingerprint: string | undefined;
    await expect
      .poll(
        async () => {
          const creds = await request(`${kr.url}/api/console/credentials`, { headers: { cookie } });
          const credsText = await creds.body.text();
          answers.push(credsText);
          fingerprint = (JSON.parse(credsText) as { credentials: Array<{ fingerprint: string }> })
            .credentials[0]?.fingerprint;
          return fingerprint;
        },
        { timeout: 10_000, interval: 100 },
      )
      .toMatch(/^[0-9a-f]{32}$/);
    const linked = await request(`${kr.url}/api/console/reconcile/links/openai/key_canary`, {
      method: 'PUT',
      headers: { cookie, origin: kr.url, 'content-type': 'application/json' },
      body: JSON.stringify({ fingerprint }),
    });
    answers.push(await linked.body.text());
    expect(linked.statusCode).toBe(200);

    const res = await request(`${kr.url}/api/console/reconcile?day=${DAY}`, { headers: { cookie } });
    const text = await res.body.text();
    answers.push(text);
    expect(res.statusCode).toBe(200);
    const body = JSON.parse(text) as {
      providers: Array<{
        provider: string;
        error: string | null;
        usage_error: string | null;
        keys: Array<{ api_key_id: string; fingerprint: string | null }>;
      }>;
    };
    // The refusals are shown, with the echoed key taken out of them.
    expect(body.providers[1]!.error).toBe(
      "Anthropic's cost report refused: HTTP 401: admin key [admin key] is disabled",
    );
    expect(body.providers[1]!.usage_error).toBe(
      "Anthropic's usage report refused: HTTP 403: admin key [admin key] may not read usage",
    );
    expect(body.providers[0]!.error).toBeNull();
    expect(body.providers[0]!.usage_error).toBeNull();
    expect(body.providers[0]!.keys).toEqual([
      expect.objectContaining({ api_key_id: 'key_canary', fingerprint }),
    ]);
    for (const path of ['/api/console/info', '/api/console/me', '/metrics', '/api/console/openapi.json']) {
      const r = await request(`${kr.url}${path}`, { headers: { cookie } });
      answers.push(await r.body.text());
    }
  } finally {
    await stopServeProcess(kr);
  }
  const cli = await runCli(['reconcile', '--day', DAY, '--json'], env);
  expect(cli.code).toBe(1); // one provider's report could not be read
  expect(cli.stderr).toContain('[admin key]');
  const cliText = await runCli(['reconcile', '--day', DAY], env);

  expect(kr.output()).toContain('"msg":"keyrelay listening"'); // the log was captured
  expect(leaks(kr.output())).toEqual([]);
  expect(leaks(answers.join('\n'))).toEqual([]);
  expect(leaks(cli.stdout + cli.stderr + cliText.stdout + cliText.stderr)).toEqual([]);
  const files = readdirSync(dataDir, { recursive: true, withFileTypes: true }).filter((f) => f.isFile());
  expect(files.length).toBeGreaterThan(0);
  for (const f of files) {
    const bytes = readFileSync(join(f.parentPath, f.name)).toString('latin1');
    expect(leaks(bytes), f.name).toEqual([]);
    expect(bytes.includes(PROVIDER_CREDENTIAL), f.name).toBe(false);
  }
  expect(answers.join('\n')).not.toContain(PROVIDER_CREDENTIAL);
});
