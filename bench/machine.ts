/**
 * How busy the rest of the machine is. On a shared 2-core box another process's compile shows up as
 * "keyrelay got slower"; the bench waits for a quiet moment before each step and records what it saw.
 */
import { readFileSync } from 'node:fs';
import { readCpuMs } from './processes.js';

const CLK_TCK = 100;

function readBusyMs(): number {
  const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!;
  const [user, nice, system, , , irq, softirq, steal] = line.trim().split(/\s+/).slice(1).map(Number);
  return (
    (((user ?? 0) + (nice ?? 0) + (system ?? 0) + (irq ?? 0) + (softirq ?? 0) + (steal ?? 0)) * 1000) /
    CLK_TCK
  );
}

function ourCpuMs(pids: number[]): number {
  let sum = 0;
  for (const pid of pids) {
    const ms = readCpuMs(pid);
    if (Number.isFinite(ms)) sum += ms;
  }
  return sum;
}

/** Starts a window; the returned function gives the cores used by processes other than `pids` since. */
export function watchOthers(pids: () => number[]): () => number {
  const t0 = performance.now();
  const busy0 = readBusyMs();
  const ours0 = ourCpuMs(pids());
  return () => {
    const wall = performance.now() - t0;
    const others = readBusyMs() - busy0 - (ourCpuMs(pids()) - ours0);
    return Math.max(0, others / wall);
  };
}

/** Waits until other processes use under `maxCores` for a 300 ms window, at most `maxWaitMs`. */
export async function waitQuiet(pids: () => number[], maxCores = 0.25, maxWaitMs = 8000): Promise<number> {
  const deadline = performance.now() + maxWaitMs;
  let seen = 0;
  do {
    const stop = watchOthers(pids);
    await new Promise((r) => setTimeout(r, 300));
    seen = stop();
    if (seen < maxCores) return seen;
  } while (performance.now() < deadline);
  return seen;
}
