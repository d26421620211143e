/**
 * Soak on whatever Node runs the suite (CI runs it on 20, 22 and 24): the built `keyrelay serve` on SQLite
 * serves a few thousand logged requests, idles past the log writer worker's exit, serves again, and stops on
 * SIGTERM. better-sqlite3 12 aborted here on Node 24.19+ (a statement collected after its environment was
 * gone); the process must exit 0 without a signal, and every answered request must have exactly one row.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sqliteDriverFor } from '../src/node-support.js';
import { SqliteLogStore } from '../src/store/sqlite/log-store.js';
import { startFakeOpenAI, type FakeUpstream } from './fakes/index.js';
import { createUserWithKey, START_ENV, START_FLAGS, tunedServe } from './helpers/process.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BIN = join(ROOT, 'bin/keyrelay.js');
/** The log writer's worker exits after 3 s without writes (src/store/sqlite/log-writer.ts). */
const PAST_WORKER_IDLE_MS = 4_500;

let openai: FakeUpstream;
let dataDir: string;

beforeAll(async () => {
  openai = await startFakeOpenAI();
  dataDir = mkdtempSync(join(tmpdir(), 'keyrelay-soak-'));
});
afterAll(async () => {
  await openai.close();
  rmSync(dataDir, { recursive: true, force: true });
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Built {
  out(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  kill(): void;
}

/** The built CLI (bin/keyrelay.js → dist/), as an installed keyrelay runs. */
function startBuilt(args: string[], env: Record<string, string>, bin = true): Built {
  const argv = bin ? [BIN, ...args] : args;
  const child = spawn(process.execPath, argv, { cwd: ROOT, env: { ...process.env, ...START_ENV, ...env } });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return { out: () => out, exited, kill: () => child.kill('SIGTERM') };
}

async function listening(kr: Built): Promise<string> {
  let exited = false;
  void kr.exited.then(() => (exited = true));
  for (let waited = 0; waited < 30_000 && !exited; waited += 50) {
    const m = /"url":"(http:\/\/[^"]+)".*"msg":"keyrelay listening"/.exec(kr.out());
    if (m) return m[1]!;
    await sleep(50);
  }
  throw new Error(
    `keyrelay did not start (${JSON.stringify(await Promise.race([kr.exited, sleep(0)]))}):\n${kr.out()}`,
  );
}

describe('SQLite soak on this Node', () => {
  it('serves, idles past the log writer exit, serves again and stops: no abort, one row per request', async () => {
    expect(existsSync(join(ROOT, 'dist/src/cli/main.js')), 'run `npm run build` first').toBe(true);
    const env = {
      KEYRELAY_DATA_DIR: dataDir,
      KEYRELAY_OPENAI_UPSTREAM: openai.url,
      KEYRELAY_PORT: '0',
      KEYRELAY_LOG_LEVEL: 'info',
    };
    const { key } = await createUserWithKey('soak@example.com', env);

    const ids: string[] = [];
    const outputs: string[] = [];
    /** One `keyrelay serve` run: bursts of requests with pauses past the worker's idle exit, then SIGTERM. */
    const serveRun = async (bursts: number[]) => {
      // The writer's idle exit shorter than the pauses below, so each burst after the first meets a new worker.
      const kr = startBuilt([...START_FLAGS, ...tunedServe({ logWriterIdleMs: 3000 }, true)], env, false);
      const url = await listening(kr);
      const dispatcher = new Agent({ connections: 8 });
      // Small bodies and 8 at a time: files run two at a time, and the other one may be timing something.
      const content = 'x'.repeat(1_000);
      const burst = async (count: number) => {
        let next = 0;
        await Promise.all(
          Array.from({ length: 8 }, async () => {
            while (next < count) {
              const stream = next++ % 4 === 0;
              const res = await request(`${url}/api/proxy/openai/v1/chat/completions`, {
                method: 'POST',
                dispatcher,
                headers: { 'proxy-api-key': key, 'content-type': 'application/json' },
                body: JSON.stringify({ model: 'gpt-4o', stream, messages: [{ role: 'user', content }] }),
              });
              await res.body.text();
              expect(res.statusCode).toBe(200);
              ids.push(String(res.headers['x-keyrelay-request-id']));
            }
          }),
        );
      };
      try {
        for (const [i, count] of bursts.entries()) {
          if (i > 0) await sleep(PAST_WORKER_IDLE_MS); // the worker closes its database and exits
          await burst(count);
        }
      } finally {
        await dispatcher.close();
        kr.kill();
      }
      const exit = await kr.exited;
      expect(exit, kr.out().slice(-4000)).toEqual({ code: 0, signal: null });
      expect(kr.out()).not.toMatch(/Assertion failed|Segmentation fault/);
      outputs.push(kr.out());
    };

    await serveRun([1_200, 400]);
    await serveRun([600, 200]); // a restart on the same files
    // Restarts: better-sqlite3 12 on Node 24 aborted at about one start in three, collecting start-up statements.
    for (let i = 0; i < 3; i++) await serveRun([200]);
    for (const out of outputs) {
      const opened = /.*"msg":"stores open".*/.exec(out)?.[0] ?? '{}';
      expect(JSON.parse(opened)).toMatchObject({
        store: 'sqlite',
        driver: sqliteDriverFor(process.versions.node),
      });
    }

    const log = new SqliteLogStore(join(dataDir, 'requests.db'));
    try {
      const rows = await log.listRecent({ limit: 100_000 });
      const rowIds = rows.map((r) => r.id).sort();
      expect(ids).toHaveLength(3_000);
      expect(new Set(rowIds).size).toBe(rowIds.length);
      expect(rowIds).toEqual([...ids].sort());
    } finally {
      await log.close();
    }
  }, 120_000);
});
