/** Child processes of the bench, and what /proc and /metrics say about them. */
import { spawn, fork, type ChildProcess } from 'node:child_process';
import { createWriteStream, readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import type { DriverMessage, Job, JobResult } from './protocol.js';

/** Where the transpiled bench scripts are (see compile.ts); set once by run.ts. */
let jsDir = fileURLToPath(new URL('.', import.meta.url));
export function useScriptDir(dir: string): void {
  jsDir = dir.endsWith('/') ? dir : `${dir}/`;
}
const script = (name: string): string => jsDir + name.replace(/\.ts$/, '.js');
const CLK_TCK = 100; // getconf CLK_TCK on Linux x86-64

export interface Child {
  proc: ChildProcess;
  pid: number;
  port: number;
  stop: () => Promise<void>;
  /** Null while running; otherwise how it ended and the end of its stderr. */
  exited: () => string | null;
}

function exitWatch(proc: ChildProcess, tail: () => string): () => string | null {
  return () => {
    if (proc.exitCode === null && proc.signalCode === null) return null;
    return `exit ${proc.exitCode ?? proc.signalCode}: ${tail().trim().slice(-1500)}`;
  };
}

function stopper(proc: ChildProcess): () => Promise<void> {
  return () =>
    new Promise((resolve) => {
      if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
      const t = setTimeout(() => proc.kill('SIGKILL'), 15_000);
      proc.once('exit', () => {
        clearTimeout(t);
        resolve();
      });
      proc.kill('SIGTERM');
    });
}

/** Starts a bench TS server that prints `{"port":N}` on its first stdout line. */
export function startBenchServer(
  file: string,
  args: string[] = [],
  pin?: string,
  node = process.execPath,
): Promise<Child> {
  const argv = [script(file), ...args];
  const proc = pin ? spawn('taskset', ['-c', pin, node, ...argv]) : spawn(node, argv);
  proc.stderr?.pipe(process.stderr);
  return new Promise((resolve, reject) => {
    let buf = '';
    proc.once('exit', (code) => reject(new Error(`${file} exited early (${code})`)));
    proc.stdout?.on('data', (c: Buffer) => {
      buf += c.toString();
      const nl = buf.indexOf('\n');
      if (nl < 0) return;
      const { port } = JSON.parse(buf.slice(0, nl)) as { port: number };
      proc.removeAllListeners('exit');
      proc.stdout?.resume();
      resolve({ proc, pid: proc.pid!, port, stop: stopper(proc), exited: exitWatch(proc, () => '') });
    });
  });
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const addr = s.address();
      const port = addr && typeof addr === 'object' ? addr.port : 0;
      s.close(() => resolve(port));
    });
  });
}

/** Starts a long-running process and waits until `readyUrl` answers 200. */
export async function startProcess(
  cmd: string,
  args: string[],
  env: Record<string, string>,
  port: number,
  readyUrl: string,
  pin?: string,
  stderrFile?: string,
): Promise<Child> {
  const proc = pin
    ? spawn('taskset', ['-c', pin, cmd, ...args], { env: { ...process.env, ...env } })
    : spawn(cmd, args, { env: { ...process.env, ...env } });
  let stderr = '';
  const file = stderrFile ? createWriteStream(stderrFile) : null;
  const keep = (c: Buffer): void => {
    stderr = (stderr + c.toString()).slice(-4000);
    file?.write(c);
  };
  proc.stderr?.on('data', keep);
  proc.stdout?.on('data', keep);
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (proc.exitCode !== null) throw new Error(`${args.join(' ')} exited (${proc.exitCode}): ${stderr}`);
    try {
      const res = await request(readyUrl);
      await res.body.dump();
      if (res.statusCode === 200) {
        return { proc, pid: proc.pid!, port, stop: stopper(proc), exited: exitWatch(proc, () => stderr) };
      }
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  proc.kill('SIGKILL');
  throw new Error(`${readyUrl} not ready after 30 s: ${stderr}`);
}

/** User + system CPU time of a process, in milliseconds. */
export function readCpuMs(pid: number): number {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return NaN; // exited
  }
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // fields[0] is field 3 (state); utime and stime are fields 14 and 15.
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLK_TCK;
}

/**
 * CPU time per thread (ms) of a process: its main thread (tid = pid) and every other one by tid. The
 * process-wide /proc/<pid>/stat already sums all threads; this splits the JavaScript thread from the rest
 * (the log writer's worker thread, V8's GC helpers, libuv's pool). Node 20 leaves every thread named "node".
 */
export function readThreadCpuMs(pid: number): Map<number, number> {
  const out = new Map<number, number>();
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tids) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.set(Number(tid), ((Number(fields[11]) + Number(fields[12])) * 1000) / CLK_TCK);
    } catch {
      // the thread ended
    }
  }
  return out;
}

/** Per-thread CPU used between two readThreadCpuMs() snapshots: main thread, busiest other, all others. */
export function threadDelta(
  pid: number,
  before: Map<number, number>,
  after: Map<number, number>,
): { mainMs: number; busiestOtherMs: number; othersMs: number } {
  let mainMs = 0;
  let busiestOtherMs = 0;
  let othersMs = 0;
  for (const [tid, ms] of after) {
    const d = ms - (before.get(tid) ?? 0);
    if (tid === pid) mainMs = d;
    else {
      othersMs += d;
      busiestOtherMs = Math.max(busiestOtherMs, d);
    }
  }
  return { mainMs, busiestOtherMs, othersMs };
}

export function readRssMb(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN; // exited
  }
}

/** Samples a process's RSS every `everyMs` until stopped; returns the peak. */
export function sampleRss(pid: number, everyMs = 100): () => number {
  let peak = readRssMb(pid);
  const t = setInterval(() => (peak = Math.max(peak, readRssMb(pid) || 0)), everyMs);
  return () => {
    clearInterval(t);
    return Math.max(peak, readRssMb(pid) || 0);
  };
}

/** A /metrics scrape as name → value (unlabelled samples only); null when /metrics does not answer. */
export async function readMetrics(origin: string): Promise<Map<string, number> | null> {
  try {
    const res = await request(`${origin}/metrics`);
    const text = await res.body.text();
    if (res.statusCode !== 200) return null;
    const out = new Map<string, number>();
    for (const m of text.matchAll(/^([a-zA-Z_:][\w:]*)\s+(\S+)/gm)) out.set(m[1]!, Number(m[2]));
    return out;
  } catch {
    return null;
  }
}

/** prom-client's `nodejs_eventloop_lag_p99_seconds` in ms; null when /metrics or the metric is missing. */
export async function readLoopDelayP99Ms(origin: string): Promise<number | null> {
  const v = (await readMetrics(origin))?.get('nodejs_eventloop_lag_p99_seconds');
  return v === undefined ? null : v * 1000;
}

/** V8 heap used and external memory (MB) from prom-client's default metrics, when exposed. */
export async function readHeapMb(
  origin: string,
): Promise<{ heap_used_mb: number | null; external_mb: number | null }> {
  const m = await readMetrics(origin);
  const mb = (name: string): number | null => {
    const v = m?.get(name);
    return v === undefined ? null : v / 1048576;
  };
  return { heap_used_mb: mb('nodejs_heap_size_used_bytes'), external_mb: mb('nodejs_external_memory_bytes') };
}

export interface Driver {
  pid: number;
  run<R extends JobResult>(job: Job, onEvent?: (e: string) => void): Promise<R>;
  stop(): void;
}

export function startDriver(pin?: string): Driver {
  const proc = fork(script('driver.ts'), [], { execArgv: [], serialization: 'advanced' });
  if (pin) spawn('taskset', ['-a', '-p', '-c', pin, String(proc.pid)]).on('error', () => undefined);
  let nextId = 1;
  const waiting = new Map<
    number,
    {
      target: string;
      resolve: (r: JobResult) => void;
      reject: (e: Error) => void;
      onEvent?: (e: string) => void;
    }
  >();
  proc.on('message', (msg: DriverMessage) => {
    const w = waiting.get(msg.id);
    if (!w) return;
    if ('event' in msg) return w.onEvent?.(msg.event);
    waiting.delete(msg.id);
    if ('error' in msg) return w.reject(new Error(msg.error));
    if (msg.errorSample) process.stderr.write(`[bench] ${w.target}: first error: ${msg.errorSample}\n`);
    w.resolve(msg.result);
  });
  proc.on('exit', (code) => {
    for (const w of waiting.values()) w.reject(new Error(`driver exited (${code})`));
    waiting.clear();
  });
  return {
    pid: proc.pid!,
    run<R extends JobResult>(job: Job, onEvent?: (e: string) => void): Promise<R> {
      const id = nextId++;
      return new Promise<R>((resolve, reject) => {
        waiting.set(id, {
          target: job.target.name,
          resolve: resolve as (r: JobResult) => void,
          reject,
          onEvent,
        });
        proc.send({ id, job });
      });
    },
    stop: () => proc.disconnect(),
  };
}
