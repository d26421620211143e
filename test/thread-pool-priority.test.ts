/**
 * libuv's thread pool runs the event loop's dns.lookup, zlib and fs work; its threads are created by the
 * first thread that queues work and take that thread's nice value. A fresh process of the built code whose
 * first user of the pool would be the PostgreSQL log reader (nice 19, resolving its host) must still get a
 * pool at the event loop's priority. From source the test runner has long started the pool, so this runs
 * the build in a process of its own.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PgLogStore } from '../src/store/postgres/log-store.js';
import { createTestDatabase, type TestDatabase } from './helpers/pg.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const run = promisify(execFile);

/** Prints, as JSON, the loop's nice value and every thread's once a first console read has run. */
const CHILD = `
import { readdirSync, readFileSync } from 'node:fs';
const { PgLogThread } = await import(process.env.LOG_THREAD_MODULE);
const nices = () => new Map(readdirSync('/proc/self/task').map((tid) => {
  const stat = readFileSync('/proc/self/task/' + tid + '/stat', 'latin1');
  return [tid, Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16])];
}));
const store = new PgLogThread(process.env.LOG_DATABASE_URL);
await store.listRecent({ limit: 1 });
const all = nices();
await store.close();
console.log(JSON.stringify({ loop: all.get(String(process.pid)), nices: [...all.values()] }));
`;

describe('the thread pool of a process whose first pool work comes from a lowered thread', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
    const store = new PgLogStore(db.url);
    await store.migrate();
    await store.close();
  });
  afterAll(() => db.drop());

  it.runIf(process.platform === 'linux')('runs at the event loop’s priority, not the reader’s', async () => {
    const built = join(ROOT, 'dist/src/store/postgres/log-thread.js');
    expect(existsSync(built), 'run `npm run build` first').toBe(true);
    // A host name, so that the reader resolves it (dns.lookup runs on the pool); the harness's URL has an IP.
    const url = db.url.replace('@127.0.0.1:', '@localhost:');
    const dir = mkdtempSync(join(tmpdir(), 'keyrelay-pool-'));
    const script = join(dir, 'first-read.mjs');
    writeFileSync(script, CHILD);
    let stdout: string;
    try {
      ({ stdout } = await run(process.execPath, [script], {
        cwd: ROOT,
        env: { ...process.env, LOG_THREAD_MODULE: built, LOG_DATABASE_URL: url },
      }));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    const { loop, nices } = JSON.parse(stdout) as { loop: number; nices: number[] };
    // The reader's own thread is lowered; every other one, the pool's among them, runs at the loop's.
    expect(nices.filter((nice) => nice !== loop)).toEqual([Math.min(19, loop + 19)]);
    expect(nices.length).toBeGreaterThan(5);
  });
});
