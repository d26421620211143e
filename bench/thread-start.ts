/**
 * What starting a store thread costs the event loop's core at the loop's own priority. Each run starts the
 * SQLite log writer's thread from the build (a fresh log, one call), while a sampler in another process, on
 * the other CPU, reads the new thread's nice value and scheduler run time (/proc/<pid>/task/<tid>/stat and
 * schedstat) as fast as it can: the CPU the thread had used when its nice value last read 0 is what it took
 * at the loop's priority (Node's own worker start-up, and whatever the worker ran before lowering itself).
 *
 *   npm run build && npx tsx bench/thread-start.ts [runs] [--build DIR]
 *
 * `--build DIR`: another checkout whose dist/ to start (e.g. a worktree of the commit before, built).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** Long enough for a thread to start, open its store and answer, on a busy machine. */
const WATCH_MS = 3000;

/** The sampler: runs in its own node process, pinned to CPU 0, so it does not share the measured core. */
const SAMPLER = `
const fs = require('node:fs');
const [pid, before, ms] = [Number(process.argv[1]), new Set(JSON.parse(process.argv[2])), Number(process.argv[3])];
const seen = new Map();
const end = Date.now() + ms;
while (Date.now() < end && fs.existsSync('/proc/' + pid)) {
  let tids = [];
  try { tids = fs.readdirSync('/proc/' + pid + '/task'); } catch { break; }
  for (const tid of tids) {
    if (before.has(tid)) continue;
    try {
      const stat = fs.readFileSync('/proc/' + pid + '/task/' + tid + '/stat', 'latin1');
      const nice = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
      const ranNs = Number(fs.readFileSync('/proc/' + pid + '/task/' + tid + '/schedstat', 'latin1').split(' ')[0]);
      const t = seen.get(tid) ?? { atLoopNice: 0, total: 0, nice };
      if (nice === 0) t.atLoopNice = ranNs;
      t.total = ranNs;
      t.nice = nice;
      seen.set(tid, t);
    } catch {}
  }
}
process.stdout.write(JSON.stringify([...seen.values()]));
`;

/**
 * One run, in a plain node process pinned to CPU 1, from a file (a worker inherits its parent's node flags:
 * started from this tsx process, the thread would load tsx's loader too, and `--input-type` would refuse
 * its module). Prints the busiest new thread as JSON.
 */
const RUN = `
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
const [build, sampler, watchMs] = process.argv.slice(2);
const dir = mkdtempSync(join(tmpdir(), 'keyrelay-thread-start-'));
const { SqliteLogStore } = await import(join(build, 'dist/src/store/sqlite/log-store.js'));
const { SqliteLogWriter } = await import(join(build, 'dist/src/store/sqlite/log-writer.js'));
const path = join(dir, 'requests.db');
const migrator = new SqliteLogStore(path);
await migrator.migrate();
await migrator.close();
const before = readdirSync('/proc/self/task');
const watch = spawn('taskset', ['-c', '0', process.execPath, '-e', sampler, String(process.pid), JSON.stringify(before), watchMs], { stdio: ['ignore', 'pipe', 'inherit'] });
let out = '';
watch.stdout.on('data', (c) => (out += c));
const done = new Promise((resolve) => watch.on('exit', resolve));
await new Promise((r) => setTimeout(r, 200)); // the sampler's own start-up
const writer = new SqliteLogWriter(path);
await writer.spendSince('bench-key', new Date(0).toISOString());
await done;
await writer.close();
rmSync(dir, { recursive: true, force: true });
const threads = JSON.parse(out || '[]').filter((t) => t.total > 2e6).sort((a, b) => b.total - a.total);
process.stdout.write(JSON.stringify(threads[0] ?? null));
`;

interface Seen {
  atLoopNice: number;
  total: number;
  nice: number;
}

function once(build: string, script: string): Promise<Seen | null> {
  return new Promise((resolve, reject) => {
    const child = spawn('taskset', ['-c', '1', process.execPath, script, build, SAMPLER, String(WATCH_MS)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.on('exit', (code) =>
      code === 0 ? resolve(JSON.parse(out) as Seen | null) : reject(new Error(`run exited ${code}`)),
    );
  });
}

const args = process.argv.slice(2);
const at = args.indexOf('--build');
const build = at >= 0 ? args[at + 1]! : ROOT;
const runs = Number(args.find((a, i) => /^\d+$/.test(a) && args[i - 1] !== '--build') ?? 5);
const scratch = mkdtempSync(join(tmpdir(), 'keyrelay-thread-start-run-'));
const script = join(scratch, 'run.mjs');
writeFileSync(script, RUN);
const rows: string[] = [];
for (let i = 0; i < runs; i++) {
  const t = await once(build, script);
  rows.push(
    t
      ? `run ${i + 1}: ${(t.atLoopNice / 1e6).toFixed(1)} ms of CPU at the loop's priority, ` +
          `${(t.total / 1e6).toFixed(1)} ms in all, nice ${t.nice} at the end`
      : `run ${i + 1}: no new thread seen`,
  );
}
rmSync(scratch, { recursive: true, force: true });
console.log(`the SQLite log writer's thread starting (${build}):\n${rows.join('\n')}`);
