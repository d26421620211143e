/**
 * Where each microsecond of a proxied request goes: V8 .cpuprofile samples (main thread and the log
 * writer's worker thread) taken inside one time window, attributed to the hot path's stages.
 *
 * A sample belongs to the first stage found walking from its leaf frame towards the root, so a node-core or
 * library frame with no stage of its own (crypto under the key check, JSON under the body parse) counts for
 * the keyrelay function that called it. Stages are matched by file basename and function name, never by a
 * full path: files that move between directories keep their stage. What no rule claims is "other", listed
 * by function so the next reader can extend the map.
 *
 * CLI: `tsx bench/stages.ts <dir-or-file> [requests]` summarises a whole profile.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

interface Rule {
  stage: string;
  /** File basenames without extension (.ts and .js both match), or a substring of the URL ending in '/'. */
  files?: string[];
  /** Function names, exact. */
  functions?: string[];
}

/**
 * First match wins within one frame; frames are tried leaf first. Order matters only where a frame could
 * match two rules (a function name listed under one stage, in a file listed under another).
 */
const RULES: Rule[] = [
  { stage: 'GC', functions: ['(garbage collector)'] },
  { stage: 'routing', files: ['target', 'routes', 'route'], functions: ['resolveTarget'] },
  {
    stage: 'key check',
    files: ['/keys/', 'verify', 'last-used', 'key-cache'],
    functions: ['verifyKey', 'crc32', 'fingerprint'],
  },
  {
    stage: 'limits',
    files: ['/limits/', 'limiter', 'access', 'rate', 'spend', 'periods', 'redis-counters'],
  },
  { stage: 'cost', files: ['cost', '@pydantic/genai-prices/'] },
  { stage: 'redaction', files: ['redact'] },
  { stage: 'row building', files: ['exchange', 'record', 'ids', 'log-row', 'row'], functions: ['toLogRow'] },
  { stage: 'queueing', files: ['queue'] },
  // Wall-clock samples: posting a batch wakes the writer, which the scheduler runs at once on the shared core,
  // so this row also holds the event loop's wait inside postMessage, not only the hand-over's own work.
  {
    stage: 'writer hand-over (main thread, incl. waits)',
    files: ['log-writer'],
    functions: ['postMessage'],
  },
  {
    stage: 'body read + request parse',
    files: ['body', 'request-info', 'body-buffers', 'read-body'],
    functions: ['readBody'],
  },
  {
    stage: 'usage tap',
    files: [
      'response-tap',
      'sse-splitter',
      'decoder',
      'json-members',
      'stream-usage',
      'normalize',
      'estimate',
      'stream-reader',
      '/usage/',
      'fzstd/',
      'gpt-tokenizer/',
    ],
  },
  { stage: 'headers', files: ['headers'] },
  { stage: 'forwarding (undici)', files: ['undici/', 'agent', 'forward', 'upstream-errors', 'upstream'] },
  { stage: 'stream back', files: ['pump', 'stream-back', 'respond'] },
  { stage: 'metrics', files: ['metrics', 'prom-client/'] },
  { stage: 'errors', files: ['errors'] },
  {
    stage: 'handler glue (handle, app, guard)',
    files: ['handle', 'admission', 'app', 'http-guard', 'server', 'proxy'],
  },
  {
    stage: 'node:http (parse, respond)',
    files: ['node:_http_server', 'node:_http_incoming', 'node:_http_common', 'node:_http_outgoing'],
    functions: ['parserOnHeadersComplete', 'parserOnBody', 'parserOnMessageComplete', 'execute'],
  },
  {
    stage: 'sockets + streams (node core)',
    files: ['node:net', 'node:internal/stream_base_commons', 'node:internal/streams/', 'node:stream'],
  },
  { stage: 'V8/native (program)', functions: ['(program)'] },
];

function frameName({ functionName, url, lineNumber }: CallFrame): string {
  const where = url
    ? `${url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*\/(src|dist)\//, '$1/')}:${lineNumber + 1}`
    : '(native)';
  return `${functionName || '(anonymous)'} ${where}`;
}

function matches(rule: Rule, frame: CallFrame): boolean {
  if (rule.functions?.includes(frame.functionName)) return true;
  if (!rule.files || !frame.url) return false;
  const url = frame.url;
  const base = basename(url).replace(/\.(ts|js|mjs|cjs)$/, '');
  return rule.files.some((f) => (f.endsWith('/') || f.includes(':') ? url.includes(f) : base === f));
}

/** Our own files only, for the keyrelay rules: a library's `headers.js` is not keyrelay's headers stage. */
function isOurs(url: string): boolean {
  return (url.includes('/src/') || url.includes('/dist/src/')) && !url.includes('node_modules');
}

function stageOf(frame: CallFrame): string | null {
  for (const rule of RULES) {
    const library = rule.files?.some((f) => f.endsWith('/') && !f.startsWith('/')) ?? false;
    const core = rule.files?.some((f) => f.startsWith('node:')) ?? false;
    const fnOnly = rule.functions?.includes(frame.functionName) ?? false;
    if (!fnOnly && !library && !core && frame.url && !isOurs(frame.url)) continue;
    if (matches(rule, frame)) return rule.stage;
  }
  return null;
}

export interface StageRow {
  stage: string;
  us: number;
  usPerRequest: number | null;
  share: number;
}

/** CPU time per request from /proc over the profiled window: the main thread, and all the others. */
export interface ThreadCpu {
  mainUs: number;
  /**
   * The SQLite log writer's worker, V8's GC helpers, libuv's pool and, under --cpu-prof, the profiler's
   * own sampling thread. Node 20 names them all "node", and the writer may start before the window, so
   * they are one row; the unprofiled saturation step reports the writer alone (the busiest of them).
   */
  otherThreadsUs: number;
}

const WRITER = 'log writer (worker thread)';
const HELPERS = 'other threads (writer, GC helpers, libuv, profiler)';

export interface StageSummary {
  files: string[];
  cpu: ThreadCpu | null;
  windowMs: number;
  requests: number | null;
  busyUs: number;
  stages: StageRow[];
  /** Per stage, its top leaf functions by self time. */
  functionsByStage: Record<string, { name: string; usPerRequest: number | null }[]>;
  /** Top functions of the "other" bucket (leaf frames). */
  other: { name: string; us: number; usPerRequest: number | null }[];
  text: string;
}

/** Profiles whose threads are not the main one hold only the SQLite log writer (a worker thread). */
function isWorkerProfile(file: string): boolean {
  // node names them CPU.<date>.<time>.<pid>.<threadId>.<seq>.cpuprofile; the main thread is 0.
  const m = /\.(\d+)\.(\d+)\.(\d+)\.cpuprofile$/.exec(file);
  return m ? m[2] !== '0' : false;
}

function listProfiles(fileOrDir: string): string[] {
  try {
    return statSync(fileOrDir).isDirectory()
      ? readdirSync(fileOrDir)
          .filter((f) => f.endsWith('.cpuprofile'))
          .map((f) => join(fileOrDir, f))
      : [fileOrDir];
  } catch {
    return [];
  }
}

/**
 * `fromUs`/`toUs` are CLOCK_MONOTONIC microseconds (process.hrtime.bigint() / 1000n in any process on the
 * host: V8's profile timestamps use the same clock on Linux); omitted, the whole profile counts.
 */
export function summarizeStages(
  fileOrDir: string,
  requests: number | null,
  fromUs = -Infinity,
  toUs = Infinity,
  cpu: ThreadCpu | null = null,
): StageSummary | null {
  const files = listProfiles(fileOrDir);
  if (files.length === 0) return null;
  const byStage = new Map<string, number>();
  const other = new Map<string, number>();
  const detail = new Map<string, Map<string, number>>();
  let busy = 0;
  let mainBusy = 0;
  let first = Infinity;
  let last = -Infinity;
  for (const file of files) {
    const p = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
    const worker = isWorkerProfile(file);
    const nodes = new Map(p.nodes.map((n) => [n.id, n]));
    const parent = new Map<number, number>();
    for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
    const memo = new Map<number, string | null>();
    const stageFor = (id: number): string | null => {
      if (memo.has(id)) return memo.get(id)!;
      const node = nodes.get(id);
      let s: string | null = null;
      if (node) {
        s = stageOf(node.callFrame);
        // The generic buckets (GC, program, node core) are leaf-only: a keyrelay caller above wins.
        if (s === null || s.startsWith('sockets') || s.startsWith('V8/native')) {
          const up = parent.has(id) ? stageFor(parent.get(id)!) : null;
          if (up !== null && !up.startsWith('V8/native')) s = up;
        }
      }
      memo.set(id, s);
      return s;
    };
    let t = p.startTime;
    for (let i = 0; i < p.samples.length; i += 1) {
      const dt = p.timeDeltas[i] ?? 0;
      t += dt;
      if (t < fromUs || t > toUs) continue;
      const node = nodes.get(p.samples[i]!);
      if (!node || node.callFrame.functionName === '(idle)') continue;
      busy += dt;
      if (!worker) mainBusy += dt;
      first = Math.min(first, t);
      last = Math.max(last, t);
      let stage = worker ? WRITER : stageFor(node.id);
      const name = frameName(node.callFrame);
      if (stage === null) {
        stage = 'other';
        other.set(name, (other.get(name) ?? 0) + dt);
      }
      const d = detail.get(stage) ?? new Map<string, number>();
      detail.set(stage, d);
      d.set(name, (d.get(name) ?? 0) + dt);
      byStage.set(stage, (byStage.get(stage) ?? 0) + dt);
    }
  }
  // A sample's time delta is wall time: on a contended core it includes time the thread waited for the CPU,
  // and a worker never reports itself idle. So with the CPU time measured (/proc), the main thread's stages
  // share the main thread's CPU by their sample counts, and every other thread is one row: the rows add up to
  // the process's CPU per request. The writer's own profile then only tells how its thread's time divides.
  const round1 = (x: number): number => Math.round(x * 10) / 10;
  const per = (us: number): number | null => {
    if (cpu) return mainBusy > 0 ? round1((us / mainBusy) * cpu.mainUs) : null;
    return requests ? round1(us / requests) : null;
  };
  const writerUs = byStage.get(WRITER) ?? 0;
  if (cpu) {
    byStage.delete(WRITER);
    byStage.set(HELPERS, cpu.otherThreadsUs);
  }
  const total = cpu ? cpu.mainUs + cpu.otherThreadsUs : busy;
  const stages = [...byStage.entries()]
    .map(([stage, us]) => {
      const usPerRequest = stage === HELPERS ? round1(us) : per(us);
      const basis = cpu ? (usPerRequest ?? 0) : us;
      return { stage, us, usPerRequest, share: total ? Math.round((basis / total) * 1000) / 10 : 0 };
    })
    .sort((a, b) => (b.usPerRequest ?? b.us) - (a.usPerRequest ?? a.us));
  const otherTop = [...other.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 12)
    .map(([name, us]) => ({ name, us, usPerRequest: per(us) }));
  const functionsByStage = Object.fromEntries(
    [...detail.keys()].map((stage) => [
      stage,
      [...detail.get(stage)!.entries()]
        .sort((a, b) => b[1] - a[1])
        .slice(0, 6)
        .map(([name, us]) => ({
          name,
          // The writer's functions: their share of its thread's samples, in %.
          usPerRequest: stage === WRITER ? (writerUs ? round1((us / writerUs) * 100) : null) : per(us),
        })),
    ]),
  );
  const windowMs = Number.isFinite(first) ? Math.round((last - first) / 1000) : 0;
  const fmt = (v: number | null): string => (v === null ? '—' : v.toFixed(1));
  const text = [
    `profiled ${windowMs} ms, ${requests ?? '?'} requests; ` +
      (cpu
        ? `CPU/req by /proc: main thread ${cpu.mainUs} µs, other threads ${cpu.otherThreadsUs} µs`
        : `µs/req = sampled time / requests`),
    '  stage                                                 µs/req    share',
    ...stages.map(
      (s) =>
        `  ${s.stage.padEnd(52)} ${fmt(s.usPerRequest).padStart(7)}  ${s.share.toFixed(1).padStart(5)} %`,
    ),
    '  top of "other" (self time, leaf frame):',
    ...otherTop.map((o) => `    ${fmt(o.usPerRequest).padStart(6)} µs/req  ${o.name}`),
  ].join('\n');
  return {
    files,
    cpu,
    windowMs,
    requests,
    busyUs: busy,
    stages,
    other: otherTop,
    functionsByStage,
    text,
  };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const args = process.argv.slice(2);
  const detailed = args.includes('--detail');
  const [target, requests] = args.filter((a) => a !== '--detail');
  if (!target) {
    console.error('usage: tsx bench/stages.ts <file.cpuprofile | dir> [requests] [--detail]');
    process.exit(2);
  }
  const s = summarizeStages(target, Number(requests) || null);
  console.log(s ? s.text : `no .cpuprofile in ${target}`);
  if (s && detailed) {
    for (const [stage, fns] of Object.entries(s.functionsByStage)) {
      console.log(`${stage}:`);
      for (const f of fns) console.log(`  ${String(f.usPerRequest ?? '—').padStart(7)} µs/req  ${f.name}`);
    }
  }
}
