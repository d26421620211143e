/** Runs the keyrelay CLI as a child process (from source, through tsx), as an operator would. */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import type { Tuning } from './tuning.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const ENTRY = ['--import', 'tsx', 'src/cli/main.ts'];
/** `npm start` (package.json): tests start keyrelay serve with its node flags and variables, as operators do. */
const START = (
  JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
    scripts: { start: string };
  }
).scripts.start;
/** The node flags `npm start` gives keyrelay serve. */
export const START_FLAGS: string[] = [...START.matchAll(/\s(--[a-z-]+)(?=\s)/g)].map((m) => m[1]!);
/** The variables `npm start` sets before node (`NAME=value node …`), which serve is started with too. */
export const START_ENV: Record<string, string> = Object.fromEntries(
  [...START.match(/^(?:\w+=\S+\s+)*/)![0].matchAll(/(\w+)=(\S+)/g)].map((m) => [m[1]!, m[2]!]),
);

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export async function runCli(
  args: string[],
  env: Record<string, string>,
  input?: string,
  /** Killed (SIGKILL, code null) if still running then: for a command expected to end by itself. */
  timeoutMs?: number,
): Promise<CliResult> {
  const child = spawn(process.execPath, [...ENTRY, ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    ...(timeoutMs && { timeout: timeoutMs, killSignal: 'SIGKILL' }),
  });
  // Standard input ends at once (with `input` first): a command that reads it never waits for a terminal.
  // A command that exits without reading it may close the pipe first: not an error of the test's.
  child.stdin.on('error', () => {});
  child.stdin.end(input ?? '');
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  // 'close', not 'exit': at 'exit' the child's output may still be in the pipes, unread (seen under load as
  // an empty stdout from a command that printed and exited 0).
  const [code] = (await once(child, 'close')) as [number | null];
  return { code, stdout, stderr };
}

/** `keyrelay users create` through the CLI; returns the account's default key (id and full secret). */
export async function createUserWithKey(
  email: string,
  env: Record<string, string>,
): Promise<{ id: string; key: string }> {
  // Only serve and migrate create a database; an operator's first command on a fresh install is migrate.
  const migrated = await runCli(['migrate'], env);
  if (migrated.code !== 0) throw new Error(`migrate exited ${migrated.code}: ${migrated.stderr}`);
  const made = await runCli(
    ['users', 'create', '--email', email, '--password', 'correct horse battery', '--json'],
    env,
  );
  if (made.code !== 0) throw new Error(`users create exited ${made.code}: ${made.stderr}`);
  return (JSON.parse(made.stdout) as { key: { id: string; key: string } }).key;
}

export interface ServeProcess {
  child: ChildProcess;
  url: string;
  /** Everything the process printed so far (JSON log lines). */
  output(): string;
  exited: Promise<number | null>;
}

export interface ServeOptions {
  /** Run under another command, e.g. `['prlimit', '--nofile=256:256', '--']`. */
  wrap?: string[];
  /** Run the built CLI (bin/keyrelay.js → dist/; `npm run build` first) instead of the sources via tsx. */
  built?: boolean;
  /**
   * Internal values no variable sets (a test's short TTL, a higher throttle), merged over the loaded
   * configuration one level deep: serve runs through test/helpers/serve-tuned.ts instead of the CLI.
   */
  tuning?: Tuning;
  /** Leave out `npm start`'s variables (START_ENV), as `keyrelay serve` run another way would. */
  withoutStartEnv?: boolean;
}

/** Node's arguments for `keyrelay serve` with internal values no variable sets (serve-tuned.ts). */
export function tunedServe(tuning: Tuning, built = false): string[] {
  return [
    '--import',
    'tsx',
    'test/helpers/serve-tuned.ts',
    JSON.stringify(tuning),
    ...(built ? ['built'] : []),
  ];
}

/** `keyrelay serve` on a free port; resolves once it logs that it is listening. */
export async function startServeProcess(
  env: Record<string, string>,
  opts: ServeOptions = {},
): Promise<ServeProcess> {
  const entry = opts.tuning
    ? tunedServe(opts.tuning, opts.built)
    : opts.built
      ? ['bin/keyrelay.js', 'serve']
      : [...ENTRY, 'serve'];
  const [command, ...args] = [...(opts.wrap ?? []), process.execPath, ...START_FLAGS, ...entry];
  const childEnv: NodeJS.ProcessEnv = {
    ...process.env,
    ...START_ENV,
    KEYRELAY_PORT: '0',
    ...env,
    // The "listening" line is logged at info: never start quieter than that.
    KEYRELAY_LOG_LEVEL: env.KEYRELAY_LOG_LEVEL === 'debug' ? 'debug' : 'info',
  };
  if (opts.withoutStartEnv) for (const name of Object.keys(START_ENV)) delete childEnv[name];
  const child = spawn(command!, args, { cwd: ROOT, env: childEnv });
  let out = '';
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const url = await new Promise<string>((resolve, reject) => {
    const onData = (d: Buffer) => {
      out += d.toString();
      const m =
        /"url":"(http:\/\/[^"]+)".*"msg":"keyrelay listening"/.exec(out) ??
        /keyrelay is listening on (http:\/\/\S+)/.exec(out);
      if (m) resolve(m[1]!);
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    void exited.then((code) => reject(new Error(`keyrelay exited (${code}) before listening:\n${out}`)));
  });
  return { child, url, output: () => out, exited };
}

/** SIGTERM, as an operator stops it; SIGKILL if it has not exited after 10 s. */
export async function stopServeProcess(p: ServeProcess): Promise<void> {
  if (p.child.exitCode === null) p.child.kill('SIGTERM');
  const timer = setTimeout(() => p.child.kill('SIGKILL'), 10_000);
  await p.exited;
  clearTimeout(timer);
}

/**
 * Listening ports are drawn from below Linux's default range for outgoing connections (32768-60999): a port
 * from that range, free when probed, can be taken by any test's outgoing connection before the server that
 * asked for it listens (EADDRINUSE). Below it, only another listener could take it.
 */
const LISTEN_PORTS = { from: 20_000, to: 32_767 };

/** Whether a port can be listened on now. */
function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/**
 * A port that was free a moment ago, outside the range outgoing connections use. For a server that must know
 * its own address up front (the console's quickstart shows public_url, which port 0 cannot give).
 */
export async function freePort(): Promise<number> {
  const span = LISTEN_PORTS.to - LISTEN_PORTS.from + 1;
  for (let tries = 0; tries < 100; tries++) {
    const port = LISTEN_PORTS.from + Math.floor(Math.random() * span);
    if (await canListen(port)) return port;
  }
  throw new Error(`no free port in ${LISTEN_PORTS.from}-${LISTEN_PORTS.to} after 100 tries`);
}
