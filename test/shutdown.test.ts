/**
 * SIGTERM under a load of streaming and non-streaming requests: every response a client saw complete or
 * cut has exactly one log row (0 lost, 0 duplicated), the process exits 0, and canary credentials and the
 * full keyrelay key appear in no log row, log line, error body or database file.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openConnection } from '../src/store/sqlite/driver.js';
import { startFakeAnthropic, startFakeOpenAI, type FakeUpstream } from './fakes/index.js';
import { createUserWithKey, startServeProcess } from './helpers/process.js';

const OPENAI_CANARY = 'sk-proj-CANARYopenai0123456789';
const ANTHROPIC_CANARY = 'sk-ant-api03-CANARYanthropic987';

let openai: FakeUpstream;
let anthropic: FakeUpstream;
let dataDir: string;

beforeAll(async () => {
  openai = await startFakeOpenAI();
  anthropic = await startFakeAnthropic();
  dataDir = mkdtempSync(join(tmpdir(), 'keyrelay-shutdown-'));
});
afterAll(async () => {
  await openai.close();
  await anthropic.close();
  rmSync(dataDir, { recursive: true, force: true });
});

type Seen = { id: string; kind: 'complete' | 'cut' } | { id: null; kind: 'no-response' };

describe('graceful shutdown', () => {
  it('loses and duplicates no log row when SIGTERM lands mid-load, and leaks no credential', async () => {
    const env = {
      KEYRELAY_DATA_DIR: dataDir,
      KEYRELAY_OPENAI_UPSTREAM: openai.url,
      KEYRELAY_ANTHROPIC_UPSTREAM: anthropic.url,
      KEYRELAY_DRAIN_TIMEOUT_MS: '1500',
      KEYRELAY_LOG_LEVEL: 'debug',
    };
    const { key } = await createUserWithKey('load@example.com', env);
    const kr = await startServeProcess(env);
    const dispatcher = new Agent({ connections: 32 });

    const scenarios: { provider: 'openai' | 'anthropic'; body: object; headers: Record<string, string> }[] = [
      { provider: 'openai', body: { model: 'gpt-4o', messages: [] }, headers: {} },
      {
        provider: 'openai',
        body: { model: 'gpt-4o', stream: true, messages: [] },
        headers: { 'x-fake-event-delay-ms': '20' },
      },
      {
        provider: 'anthropic',
        body: { model: 'claude-sonnet-4-6', max_tokens: 9, stream: true, messages: [] },
        headers: { 'x-fake-event-delay-ms': '30' },
      },
      {
        provider: 'anthropic',
        body: { model: 'claude-sonnet-4-6', max_tokens: 9, messages: [] },
        headers: { 'x-fake-status': '500' },
      },
      {
        provider: 'openai',
        body: { model: 'gpt-4o', stream: true, messages: [] },
        headers: { 'x-fake-drop-after-events': '2' },
      },
      // Outlives the drain deadline: cut at shutdown, and must still be logged.
      {
        provider: 'anthropic',
        body: { model: 'claude-sonnet-4-6', max_tokens: 9, stream: true, messages: [] },
        headers: { 'x-fake-event-delay-ms': '800' },
      },
    ];
    const errorBodies: string[] = [];
    const one = async (i: number): Promise<Seen> => {
      const s = scenarios[i % scenarios.length]!;
      const path = s.provider === 'openai' ? '/v1/chat/completions' : '/v1/messages';
      const cred =
        s.provider === 'openai'
          ? { authorization: `Bearer ${OPENAI_CANARY}` }
          : { 'x-api-key': ANTHROPIC_CANARY, 'anthropic-version': '2023-06-01' };
      let res;
      try {
        res = await request(`${kr.url}/api/proxy/${s.provider}${path}`, {
          method: 'POST',
          dispatcher,
          headers: { 'content-type': 'application/json', 'proxy-api-key': key, ...cred, ...s.headers },
          body: JSON.stringify(s.body),
        });
      } catch {
        return { id: null, kind: 'no-response' };
      }
      const id = String(res.headers['x-keyrelay-request-id']);
      try {
        const text = await res.body.text();
        if (res.statusCode >= 400) errorBodies.push(text);
        return { id, kind: 'complete' };
      } catch {
        return { id, kind: 'cut' };
      }
    };

    const seen: Promise<Seen>[] = [];
    let i = 0;
    let done = 0;
    let termAt = 0;
    // A request every 5 ms; SIGTERM once 40 have been answered (the machine may be slow), then 300 ms more.
    for (const start = Date.now(); !termAt || Date.now() - termAt < 300;) {
      seen.push(one(i++).finally(() => done++));
      if (!termAt && (done >= 40 || Date.now() - start > 10_000)) {
        kr.child.kill('SIGTERM');
        termAt = Date.now();
      }
      await new Promise((r) => setTimeout(r, 5));
    }
    const results = await Promise.all(seen);
    const code = await kr.exited;
    await dispatcher.close();
    expect(code).toBe(0);

    const answered = results.filter((r): r is Extract<Seen, { id: string }> => r.id !== null);
    expect(answered.length).toBeGreaterThanOrEqual(40);
    expect(results.some((r) => r.kind === 'cut')).toBe(true);

    const db = openConnection(join(dataDir, 'requests.db'), { readonly: true });
    const rows = db.prepare<[], { id: string; outcome: string }>('SELECT id, outcome FROM requests').all();
    db.close();
    const rowIds = rows.map((r) => r.id);
    expect(new Set(rowIds).size).toBe(rowIds.length); // 0 duplicated
    const missing = answered.filter((r) => !rowIds.includes(r.id));
    if (missing.length)
      console.log(
        'missing',
        missing,
        kr
          .output()
          .split('\n')
          .filter((l) => missing.some((m) => l.includes(m.id))),
      );
    expect(rowIds.sort()).toEqual(answered.map((r) => r.id).sort()); // 0 lost, none extra
    expect(rows.some((r) => r.outcome === 'timeout')).toBe(true); // cut at the drain deadline, still logged

    // Canaries: nowhere on disk, in the process output or in any error body.
    const secrets = [OPENAI_CANARY, ANTHROPIC_CANARY, key];
    const files = readdirSync(dataDir).map((f) => readFileSync(join(dataDir, f)));
    for (const s of secrets) {
      for (const f of files) expect(f.includes(Buffer.from(s))).toBe(false);
      expect(kr.output()).not.toContain(s);
      for (const b of errorBodies) expect(b).not.toContain(s);
    }
  }, 60_000);
});
