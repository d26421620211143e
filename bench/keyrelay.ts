/** Building, seeding and starting keyrelay from the built code, as an operator would run it. */
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { openConnection } from '../src/store/sqlite/driver.js';
import { START_ENV, START_FLAGS } from '../test/helpers/process.js';
import { freePort, startProcess, type Child } from './processes.js';

const run = promisify(execFile);
export const ROOT = fileURLToPath(new URL('..', import.meta.url));
const MAIN = join(ROOT, 'dist/src/cli/main.js');

export function hasKeyrelaySource(): boolean {
  return existsSync(join(ROOT, 'src/cli/main.ts'));
}

/**
 * Builds the server into dist/. In a shared checkout someone's half-edited file can break the build: then
 * the existing dist/ is measured and the returned warning says so (null when the build succeeded).
 */
export async function buildServer(): Promise<string | null> {
  try {
    await run(
      process.execPath,
      [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'],
      {
        cwd: ROOT,
        maxBuffer: 16 << 20,
      },
    );
    return null;
  } catch (err) {
    const out = (err as { stdout?: string }).stdout ?? String(err);
    if (!existsSync(MAIN))
      throw new Error(`build failed and there is no dist/ to fall back on:\n${out.slice(0, 2000)}`);
    const built = statSync(MAIN).mtime.toISOString();
    return `build failed; measuring the existing dist/ (built ${built}):\n${out.slice(0, 1500)}`;
  }
}

/**
 * The environment keyrelay sees: ours without any KEYRELAY_* (a stray DATABASE_URL would switch stores) or
 * OTEL_* (an exporting shell would turn OpenTelemetry on in every column; the "kr otel" column sets its own).
 */
function cleanEnv(extra: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env))
    if (v !== undefined && !k.startsWith('KEYRELAY_') && !k.startsWith('OTEL_')) env[k] = v;
  return { ...env, ...extra };
}

/** Runs a `keyrelay` command from the build with `env` (and none of ours: cleanEnv); resolves to its stdout. */
export async function keyrelayCli(env: Record<string, string>, args: string[]): Promise<string> {
  const { stdout } = await run(process.execPath, [MAIN, ...args], {
    cwd: ROOT,
    env: cleanEnv({ KEYRELAY_LOG_LEVEL: 'warn', ...env }),
  });
  return stdout;
}

/**
 * A user and its key in `dataDir`; `limits` are `keys limits` flags for the key, e.g. ['--tpm', '1000'].
 * `build`: another checkout's build (KeyrelayStart.build), whose schema the data dir then holds.
 */
export async function createBenchKey(
  dataDir: string,
  limits: string[] = [],
  build?: string,
): Promise<string> {
  const main = build ? join(build, 'dist/src/cli/main.js') : MAIN;
  // `users create` refuses a data dir without keyrelay's schema (only serve and migrate create one).
  await run(process.execPath, [main, 'migrate'], {
    cwd: ROOT,
    env: cleanEnv({ KEYRELAY_DATA_DIR: dataDir, KEYRELAY_LOG_LEVEL: 'warn' }),
  });
  const { stdout } = await run(
    process.execPath,
    [
      main,
      'users',
      'create',
      '--email',
      'bench@example.com',
      '--password',
      'bench-password-9f3k2x',
      '--json',
    ],
    { cwd: ROOT, env: cleanEnv({ KEYRELAY_DATA_DIR: dataDir, KEYRELAY_LOG_LEVEL: 'warn' }) },
  );
  const parsed = JSON.parse(stdout) as { key?: { key?: string } };
  const key = parsed.key?.key;
  if (!key) throw new Error(`users create printed no key: ${stdout.slice(0, 300)}`);
  if (limits.length > 0)
    await run(process.execPath, [main, 'keys', 'limits', key, ...limits], {
      cwd: ROOT,
      env: cleanEnv({ KEYRELAY_DATA_DIR: dataDir, KEYRELAY_LOG_LEVEL: 'warn' }),
    });
  return key;
}

export interface KeyrelayStart {
  dataDir: string;
  upstream: string;
  requestLog: boolean;
  profileDir?: string;
  pin?: string;
  /** keyrelay's stdout and stderr go here. */
  logFile?: string;
  /** Extra settings (--env); the request-log switch of the logging-off process still wins. */
  env?: Record<string, string>;
  /** The node binary (--node); ours by default. */
  node?: string;
  /** Extra node flags before the script (--node-flag), e.g. --max-semi-space-size=4. */
  nodeFlags?: string[];
  /** Another checkout's build to run (e.g. a worktree of the commit before, built); ours by default. */
  build?: string;
}

export async function startKeyrelay(o: KeyrelayStart): Promise<Child> {
  const port = await freePort();
  const env = cleanEnv({
    ...START_ENV,
    KEYRELAY_HOST: '127.0.0.1',
    KEYRELAY_PORT: String(port),
    KEYRELAY_DATA_DIR: o.dataDir,
    KEYRELAY_OPENAI_UPSTREAM: o.upstream,
    KEYRELAY_ANTHROPIC_UPSTREAM: o.upstream,
    // debug: the idle memory reclaim logs each run there, and the bench says when it ran (idleReclaims).
    KEYRELAY_LOG_LEVEL: 'debug',
    ...o.env,
    ...(o.requestLog ? {} : { KEYRELAY_REQUEST_LOG: 'false' }),
  });
  // As shipped: `npm start`'s variables and node flags (package.json), then the bench's own.
  const nodeArgs = [
    ...START_FLAGS,
    ...(o.nodeFlags ?? []),
    ...(o.profileDir ? ['--cpu-prof', `--cpu-prof-dir=${o.profileDir}`] : []),
  ];
  return startProcess(
    o.node ?? process.execPath,
    [...nodeArgs, o.build ? join(o.build, 'dist/src/cli/main.js') : MAIN, 'serve'],
    env,
    port,
    `http://127.0.0.1:${port}/readyz`,
    o.pin,
    o.logFile,
  );
}

export interface LogSummary {
  rows: number;
  /** Per column (outcome, usage_source, stream) the count of each value: shows which path was measured. */
  breakdown: Record<string, Record<string, number>>;
}

/**
 * What keyrelay's embedded request log holds, read after it stopped (so the write-behind queue is
 * flushed). The table is found rather than assumed; null when there is no SQLite file or table.
 */
export function inspectLog(dataDir: string): LogSummary | null {
  try {
    let best: LogSummary | null = null;
    for (const f of readdirSync(dataDir).filter((name) => /\.(db|sqlite3?)$/.test(name))) {
      const db = openConnection(join(dataDir, f), { readonly: true });
      try {
        const tables = db
          .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE '%request%'")
          .all() as { name: string }[];
        for (const { name } of tables) {
          const table = `"${name.replace(/"/g, '""')}"`;
          const { n } = db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number };
          if (best && best.rows >= n) continue;
          const columns = new Set(
            (db.prepare(`PRAGMA table_info(${table})`).all() as { name: string }[]).map((c) => c.name),
          );
          const breakdown: LogSummary['breakdown'] = {};
          for (const col of ['outcome', 'usage_source', 'stream'].filter((c) => columns.has(c))) {
            const rows = db
              .prepare(`SELECT ${col} AS v, count(*) AS n FROM ${table} GROUP BY ${col}`)
              .all() as {
              v: string | number;
              n: number;
            }[];
            breakdown[col] = Object.fromEntries(rows.map((r) => [String(r.v), r.n]));
          }
          best = { rows: n, breakdown };
        }
      } finally {
        db.close();
      }
    }
    return best;
  } catch {
    return null;
  }
}

/**
 * The idle reclaims a keyrelay ran between two moments (Date.now()), its start-up one aside: a step that
 * follows one begins with a shrunk heap and a trimmed C heap, and its first burst pays for regrowing them.
 */
export function reclaimsBetween(logFile: string, from: number, to: number): { at: number; ms: number }[] {
  return idleReclaims(logFile).filter((r) => r.reason !== 'start' && r.at > from && r.at < to);
}

/** The idle memory reclaims (src/cli/memory.ts) a keyrelay logged at debug level, from its log file. */
export function idleReclaims(logFile: string): { at: number; reason: string; ms: number }[] {
  if (!existsSync(logFile)) return [];
  const out: { at: number; reason: string; ms: number }[] = [];
  for (const line of readFileSync(logFile, 'utf8').split('\n')) {
    if (!line.includes('"idle memory reclaim"')) continue;
    try {
      const e = JSON.parse(line) as { time: number; reason: string; ms: number };
      out.push({ at: e.time, reason: e.reason, ms: e.ms });
    } catch {
      // a line cut by the process's exit
    }
  }
  return out;
}
