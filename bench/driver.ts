/**
 * The load driver, in its own process (forked by run.ts, jobs over IPC) so its CPU never counts as the
 * target's. Open loop: sends follow a fixed schedule and latency runs from the intended send time, so a
 * stalled target cannot slow the driver down and hide its own stall (coordinated omission).
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Pool } from 'undici';
import type {
  ClosedResult,
  DriverMessage,
  DriverRequest,
  DriverSelf,
  HoldResult,
  Job,
  JobResult,
  OpenResult,
  ProviderName,
  SlowRequest,
  StreamResult,
  Target,
} from './protocol.js';
import { BODIES, upstreamQuery } from './protocol.js';
import { summarize } from './stats.js';

const pools = new Map<string, Pool>();
/** The first failure of the current job, so the parent can say why requests failed. */
let errorSample: string | null = null;
function noteError(what: string): void {
  errorSample ??= what.slice(0, 300);
}
function poolFor(origin: string): Pool {
  let p = pools.get(origin);
  if (!p) {
    p = new Pool(origin, {
      connections: 256,
      keepAliveTimeout: 60_000,
      headersTimeout: 60_000,
      bodyTimeout: 60_000,
    });
    pools.set(origin, p);
  }
  return p;
}

interface Outcome {
  ok: boolean;
  firstByteAt: number;
  endAt: number;
  chunks: number;
}

async function send(
  pool: Pool,
  target: Target,
  provider: ProviderName,
  stream: boolean,
  query = '',
): Promise<Outcome> {
  const res = await pool.request({
    method: 'POST',
    path: target.paths[provider] + query,
    headers: { ...target.headers[provider], 'content-type': 'application/json' },
    body: stream ? BODIES[provider].stream : BODIES[provider].plain,
  });
  let firstByteAt = 0;
  let chunks = 0;
  if (res.statusCode !== 200) {
    noteError(`HTTP ${res.statusCode}: ${await res.body.text()}`);
    return { ok: false, firstByteAt: performance.now(), endAt: performance.now(), chunks: 1 };
  }
  for await (const _ of res.body) {
    if (chunks === 0) firstByteAt = performance.now();
    chunks += 1;
  }
  return { ok: true, firstByteAt, endAt: performance.now(), chunks };
}

/** Runs `fn` and measures the driver's own CPU share and event-loop delay over it. */
async function measureSelf<T>(fn: () => Promise<T>): Promise<[T, DriverSelf]> {
  const h = monitorEventLoopDelay({ resolution: 5 });
  h.enable();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const out = await fn();
  const cpu = process.cpuUsage(cpu0);
  h.disable();
  const wallUs = (performance.now() - t0) * 1000;
  return [out, { cpuShare: (cpu.user + cpu.system) / wallUs, eventLoopP99Ms: h.percentile(99) / 1e6 }];
}

async function runOpen(job: Extract<Job, { kind: 'open' }>): Promise<OpenResult> {
  const pool = poolFor(job.target.origin);
  const total = Math.max(1, Math.round((job.rate * job.durationMs) / 1000));
  const interval = 1000 / job.rate;
  const latency = new Float64Array(total);
  const service = new Float64Array(total);
  const lag = new Float64Array(total);
  let ok = 0;
  let errors = 0;
  let done = 0;
  const start = performance.now() + 10;
  let lastEnd = start;
  await new Promise<void>((resolve) => {
    let i = 0;
    const finish = (): void => {
      done += 1;
      if (done === total) resolve();
    };
    const fire = (idx: number, intended: number): void => {
      const sentAt = performance.now();
      lag[idx] = sentAt - intended;
      send(pool, job.target, 'openai', false).then(
        (o) => {
          latency[idx] = o.endAt - intended;
          service[idx] = o.endAt - sentAt;
          lastEnd = Math.max(lastEnd, o.endAt);
          if (o.ok) ok += 1;
          else errors += 1;
          finish();
        },
        (err: unknown) => {
          noteError(String(err));
          latency[idx] = performance.now() - intended;
          service[idx] = performance.now() - sentAt;
          errors += 1;
          finish();
        },
      );
    };
    const tick = (): void => {
      const now = performance.now();
      while (i < total && start + i * interval <= now) {
        fire(i, start + i * interval);
        i += 1;
      }
      if (i < total) setTimeout(tick, Math.max(0, start + i * interval - performance.now()));
    };
    setTimeout(tick, 10);
  });
  const summary = summarize(latency);
  const slowest: SlowRequest[] = [];
  for (let idx = 0; idx < total; idx++)
    if (latency[idx]! >= summary.p99)
      slowest.push({ at: performance.timeOrigin + start + idx * interval, ms: latency[idx]! });
  return {
    kind: 'open',
    sent: total,
    ok,
    errors,
    achievedRps: (total * 1000) / (lastEnd - start),
    latency: summary,
    service: summarize(service),
    scheduleLag: summarize(lag),
    slowest,
    driver: { cpuShare: 0, eventLoopP99Ms: 0 },
  };
}

async function runClosed(job: Extract<Job, { kind: 'closed' }>): Promise<ClosedResult> {
  const pool = poolFor(job.target.origin);
  const lat: number[] = [];
  let errors = 0;
  const t0 = performance.now();
  const deadline = t0 + job.durationMs;
  const worker = async (): Promise<void> => {
    while (performance.now() < deadline) {
      const s = performance.now();
      try {
        const o = await send(pool, job.target, 'openai', false);
        if (o.ok) lat.push(o.endAt - s);
        else errors += 1;
      } catch (err) {
        noteError(String(err));
        errors += 1;
      }
    }
  };
  await Promise.all(Array.from({ length: job.concurrency }, worker));
  const wall = performance.now() - t0;
  return {
    kind: 'closed',
    ok: lat.length,
    errors,
    rps: (lat.length * 1000) / wall,
    latency: summarize(lat),
    driver: { cpuShare: 0, eventLoopP99Ms: 0 },
  };
}

async function runStream(job: Extract<Job, { kind: 'stream' }>): Promise<StreamResult> {
  const pool = poolFor(job.target.origin);
  const query = upstreamQuery(job.chunks, job.chunkMs);
  const ttfb: number[] = [];
  const ttlb: number[] = [];
  let chunks = 0;
  let errors = 0;
  const deadline = performance.now() + job.durationMs;
  const worker = async (): Promise<void> => {
    while (performance.now() < deadline) {
      const s = performance.now();
      try {
        const o = await send(pool, job.target, job.provider, true, query);
        if (!o.ok) {
          errors += 1;
          continue;
        }
        ttfb.push(o.firstByteAt - s);
        ttlb.push(o.endAt - s);
        chunks += o.chunks;
      } catch (err) {
        noteError(String(err));
        errors += 1;
      }
    }
  };
  await Promise.all(Array.from({ length: job.concurrency }, worker));
  return {
    kind: 'stream',
    streams: ttfb.length,
    errors,
    ttfb: summarize(ttfb),
    ttlb: summarize(ttlb),
    chunksPerStream: ttfb.length ? chunks / ttfb.length : 0,
    driver: { cpuShare: 0, eventLoopP99Ms: 0 },
  };
}

/** Opens `count` slow streams at once, tells the parent when all are open, returns when all ended. */
async function runHold(job: Extract<Job, { kind: 'hold' }>, id: number): Promise<HoldResult> {
  const pool = new Pool(job.target.origin, { connections: job.count + 16, bodyTimeout: 120_000 });
  const query = upstreamQuery(job.chunks, job.chunkMs);
  const t0 = performance.now();
  let opened = 0;
  let completed = 0;
  let errors = 0;
  let openMs = NaN;
  const one = async (): Promise<void> => {
    try {
      const res = await pool.request({
        method: 'POST',
        path: job.target.paths[job.provider] + query,
        headers: { ...job.target.headers[job.provider], 'content-type': 'application/json' },
        body: BODIES[job.provider].stream,
      });
      if (res.statusCode !== 200) {
        noteError(`HTTP ${res.statusCode}: ${await res.body.text()}`);
        errors += 1;
        return;
      }
      let first = true;
      for await (const _ of res.body) {
        if (!first) continue;
        first = false;
        opened += 1;
        if (opened === job.count) {
          openMs = performance.now() - t0;
          reply({ id, event: 'all-open' });
        }
      }
      completed += 1;
    } catch (err) {
      noteError(String(err));
      errors += 1;
    }
  };
  await Promise.all(Array.from({ length: job.count }, one));
  await pool.close();
  return { kind: 'hold', opened, completed, errors, openMs, driver: { cpuShare: 0, eventLoopP99Ms: 0 } };
}

function reply(msg: DriverMessage): void {
  process.send?.(msg);
}

async function run(req: DriverRequest): Promise<void> {
  const { job } = req;
  errorSample = null;
  try {
    const [result, self] = await measureSelf<JobResult>(() => {
      switch (job.kind) {
        case 'open':
          return runOpen(job);
        case 'closed':
          return runClosed(job);
        case 'stream':
          return runStream(job);
        case 'hold':
          return runHold(job, req.id);
      }
    });
    result.driver = self;
    reply({ id: req.id, result, errorSample });
  } catch (err) {
    reply({ id: req.id, error: err instanceof Error ? err.message : String(err) });
  }
}

process.on('message', (msg: DriverRequest) => void run(msg));
process.on('disconnect', () => {
  for (const p of pools.values()) p.destroy().catch(() => undefined);
  process.exit(0);
});
