/**
 * KEYRELAY_LOG_WRITER_NICE: `keyrelay serve` on SQLite runs its log writer's thread that many nice levels
 * below the event loop, so that a batch of rows written on a core the event loop shares does not hold up
 * the requests arriving meanwhile (docs/performance.md, "Fifth pass"); 0 keeps every thread at the process's
 * priority. Read from /proc as an operator would (Linux keeps a nice value per thread).
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqliteLogStore } from '../src/store/sqlite/log-store.js';
import { startFakeOpenAI, type FakeUpstream } from './fakes/index.js';
import { createUserWithKey, startServeProcess, stopServeProcess } from './helpers/process.js';

let openai: FakeUpstream;
let dataDir: string;
let key: string;

beforeAll(async () => {
  openai = await startFakeOpenAI();
  dataDir = mkdtempSync(join(tmpdir(), 'keyrelay-writer-nice-'));
  ({ key } = await createUserWithKey('nice@example.com', env()));
});
afterAll(async () => {
  await openai.close();
  rmSync(dataDir, { recursive: true, force: true });
});

function env(extra: Record<string, string> = {}): Record<string, string> {
  return { KEYRELAY_DATA_DIR: dataDir, KEYRELAY_OPENAI_UPSTREAM: openai.url, ...extra };
}

/** Nice value of each thread of `pid`, main thread first (field 19 of /proc/<pid>/task/<tid>/stat). */
function threadNices(pid: number): { main: number; others: number[] } {
  const nice = (tid: string) => {
    const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
  };
  const tids = readdirSync(`/proc/${pid}/task`).filter((t) => t !== String(pid));
  return { main: nice(String(pid)), others: tids.map(nice) };
}

async function loggedRows(): Promise<number> {
  const store = new SqliteLogStore(join(dataDir, 'requests.db'));
  try {
    return await store.count();
  } finally {
    await store.close();
  }
}

/** One logged request; resolves once its row is in the file, so the writer's thread is running. */
async function logOne(url: string): Promise<void> {
  const before = await loggedRows();
  const res = await request(`${url}/api/proxy/openai/v1/chat/completions`, {
    method: 'POST',
    headers: { 'proxy-api-key': key, authorization: 'Bearer sk-test', 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
  });
  expect(res.statusCode).toBe(200);
  await res.body.dump();
  const deadline = Date.now() + 10_000;
  while ((await loggedRows()) === before) {
    if (Date.now() > deadline) throw new Error('the row was not written within 10 s');
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('the log writer thread priority', () => {
  it.runIf(process.platform === 'linux')(
    'is 2 levels below the event loop by default',
    async () => {
      const kr = await startServeProcess(env());
      try {
        await logOne(kr.url);
        const { main, others } = threadNices(kr.child.pid!);
        const seen = JSON.stringify({ main, others });
        // Exactly one thread, the writer's; the event loop, V8's and libuv's threads keep the process's.
        expect(others.filter((n) => n === Math.min(19, main + 2)).length, seen).toBe(1);
        expect(
          others.filter((n) => n !== main && n !== Math.min(19, main + 2)),
          seen,
        ).toEqual([]);
      } finally {
        await stopServeProcess(kr);
      }
    },
    60_000,
  );

  it.runIf(process.platform === 'linux')(
    'is the process priority with KEYRELAY_LOG_WRITER_NICE=0',
    async () => {
      const kr = await startServeProcess(env({ KEYRELAY_LOG_WRITER_NICE: '0' }));
      try {
        await logOne(kr.url);
        const { main, others } = threadNices(kr.child.pid!);
        expect(
          others.every((n) => n === main),
          JSON.stringify({ main, others }),
        ).toBe(true);
      } finally {
        await stopServeProcess(kr);
      }
    },
    60_000,
  );
});
