/** Starts every process of a bench run and describes each column (subject) the driver measures. */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { compileBench } from './compile.js';
import { buildServer, createBenchKey, hasKeyrelaySource, startKeyrelay } from './keyrelay.js';
import type { Options } from './options.js';
import { startBenchServer, startDriver, useScriptDir, type Child, type Driver } from './processes.js';
import type { Target } from './protocol.js';
import type { Subject, SubjectId } from './scenarios.js';

export interface Setup {
  driver: Driver;
  children: Child[];
  subjects: Subject[];
  dataDirs: Partial<Record<SubjectId, string>>;
  keyrelayError: string | null;
  buildWarning: string | null;
  /**
   * Starts one more keyrelay, as shipped, under --cpu-prof into `profileDir` (same pinning): the per-stage
   * profile. Null when keyrelay is not measured.
   */
  startProfiled: ((profileDir: string) => Promise<{ subject: Subject; child: Child }>) | null;
  /** Stops every process and removes temp files. */
  teardown: () => Promise<void>;
}

const LIMITED_KEY = [
  '--budget-usd',
  '1000000',
  '--budget-mode',
  'hard',
  '--budget-period',
  'month',
  '--tpm',
  '1000000000',
];

function makeTarget(id: SubjectId, origin: string, prefix: string, key?: string): Target {
  const proxy: Record<string, string> = key ? { 'proxy-api-key': key } : {};
  return {
    name: id,
    origin,
    paths: { openai: `${prefix}/openai/v1/chat/completions`, anthropic: `${prefix}/anthropic/v1/messages` },
    headers: {
      openai: { ...proxy, authorization: 'Bearer sk-bench' },
      anthropic: { ...proxy, 'x-api-key': 'sk-ant-bench', 'anthropic-version': '2023-06-01' },
    },
  };
}

function subject(id: SubjectId, target: Target, child: Child, full: boolean, streams = full): Subject {
  return { id, target, pid: child.pid, sent: 0, full, streams, exited: child.exited };
}

export async function startAll(
  opts: Options,
  files: { logPrefix: string; profileDir?: string },
  log: (msg: string) => void,
): Promise<Setup> {
  // Pinned (the default): each proxy, with all its threads (the SQLite log writer, V8's GC helpers, libuv's
  // pool), runs on CPU 1 only; the load (driver, fake upstream) shares CPU 0. A deployment runs several
  // instances per machine, so keyrelay cannot count on a spare core for its writer thread.
  const pinProxy = opts.pin ? '1' : undefined;
  const pinLoad = opts.pin ? '0' : undefined;
  // The bench itself samples the proxies' threads during steps (tail.ts): on the load's core, never on the
  // proxies'.
  if (pinLoad) execFileSync('taskset', ['-a', '-p', '-c', pinLoad, String(process.pid)], { stdio: 'ignore' });
  const compiled = compileBench();
  useScriptDir(compiled.dir);
  const children: Child[] = [];
  const upstream = await startBenchServer('upstream.ts', [], pinLoad);
  children.push(upstream);
  const upOrigin = `http://127.0.0.1:${upstream.port}`;
  const driver = startDriver(pinLoad);
  const bare = await startBenchServer('bare-proxy.ts', [upOrigin, upOrigin], pinProxy, opts.node);
  children.push(bare);
  const direct = makeTarget('direct', upOrigin, '');
  direct.paths = { openai: '/v1/chat/completions', anthropic: '/v1/messages' };
  const subjects = [
    subject('direct', direct, upstream, true),
    subject('bare', makeTarget('bare', `http://127.0.0.1:${bare.port}`, '/api/proxy'), bare, true),
  ];

  let keyrelayError: string | null = null;
  let buildWarning: string | null = null;
  const dataDirs: Partial<Record<SubjectId, string>> = {};
  if (opts.keyrelay && !hasKeyrelaySource()) keyrelayError = 'src/cli/main.ts does not exist yet';
  else if (opts.keyrelay) {
    try {
      const tmp = mkdtempSync(join(tmpdir(), 'keyrelay-bench-'));
      if (opts.build) {
        log('building the server (tsc -p tsconfig.build.json)…');
        buildWarning = await buildServer();
        if (buildWarning) log(buildWarning);
      }
      // The collector of the OpenTelemetry column shares the load's core, like the fake upstream.
      const sink = opts.otel ? await startBenchServer('otlp-sink.ts', [], pinLoad) : null;
      if (sink) children.push(sink);
      const columns: [SubjectId, boolean, Record<string, string>, string[]][] = [
        ['keyrelay', true, {}, []],
        ['keyrelay_nolog', false, {}, []],
        ['keyrelay_nobody', true, { KEYRELAY_BODY_LOG_BYTES: '0' }, []],
        ['keyrelay_nosearch', true, { KEYRELAY_LOG_SEARCH: 'false' }, []],
        // A key with a hard budget and a tokens-per-minute limit, both far from reached: what checking and
        // settling a key's limits costs each request, beside the same keyrelay with a key without limits.
        ['keyrelay_limits', true, {}, LIMITED_KEY],
      ];
      if (opts.baseline) columns.push(['keyrelay_baseline', true, {}, []]);
      if (sink)
        columns.push([
          'keyrelay_otel',
          true,
          { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${sink.port}` },
          [],
        ]);
      for (const [id, requestLog, extra, limits] of columns) {
        if (id === 'keyrelay_nosearch' && !opts.noSearchColumn) continue;
        if (id === 'keyrelay_limits' && !opts.limitsColumn) continue;
        const dataDir = join(tmp, id);
        mkdirSync(dataDir);
        dataDirs[id] = dataDir;
        const build = id === 'keyrelay_baseline' ? (opts.baseline ?? undefined) : undefined;
        const key = await createBenchKey(dataDir, limits, build);
        const kr = await startKeyrelay({
          build,
          dataDir,
          upstream: upOrigin,
          requestLog,
          pin: pinProxy,
          profileDir: requestLog ? files.profileDir : undefined,
          logFile: `${files.logPrefix}-${id}.log`,
          env: { ...opts.env, ...extra },
          node: opts.node,
          nodeFlags: opts.nodeFlags,
        });
        children.push(kr);
        // Log off and body logging off are measured for latency and throughput; memory only as shipped.
        // Streams also with the log off: what the log costs a stream's first byte (the log writer shares
        // keyrelay's core).
        subjects.push(
          subject(
            id,
            makeTarget(id, `http://127.0.0.1:${kr.port}`, '/api/proxy', key),
            kr,
            id === 'keyrelay' || id === 'keyrelay_baseline',
            id === 'keyrelay' || id === 'keyrelay_nolog' || id === 'keyrelay_baseline',
          ),
        );
      }
    } catch (err) {
      keyrelayError = err instanceof Error ? err.message : String(err);
    }
  }
  if (keyrelayError) log(`keyrelay not measured: ${keyrelayError.slice(0, 400)}`);
  const startProfiled =
    opts.keyrelay && !keyrelayError
      ? async (profileDir: string) => {
          const dataDir = mkdtempSync(join(tmpdir(), 'keyrelay-bench-prof-'));
          const inner = join(dataDir, 'data');
          mkdirSync(inner);
          const key = await createBenchKey(inner);
          const kr = await startKeyrelay({
            dataDir: inner,
            upstream: upOrigin,
            requestLog: true,
            pin: pinProxy,
            profileDir,
            logFile: `${files.logPrefix}-keyrelay_profiled.log`,
            env: opts.env,
            node: opts.node,
            nodeFlags: opts.nodeFlags,
          });
          const target = makeTarget('keyrelay', `http://127.0.0.1:${kr.port}`, '/api/proxy', key);
          const stop = kr.stop;
          kr.stop = async () => {
            await stop();
            rmSync(dataDir, { recursive: true, force: true });
          };
          return { subject: subject('keyrelay', target, kr, true), child: kr };
        }
      : null;
  const restorePriority = opts.nice
    ? raisePriority([process.pid, driver.pid, ...children.map((c) => c.pid)], log)
    : null;

  return {
    driver,
    children,
    subjects,
    dataDirs,
    keyrelayError,
    buildWarning,
    startProfiled,
    teardown: async () => {
      driver.stop();
      await Promise.all(children.map((c) => c.stop()));
      restorePriority?.();
      compiled.remove();
    },
    // tmp (the data dirs) is removed by run.ts once it has counted the log rows.
  };
}

export function removeDirs(dirs: (string | undefined)[]): void {
  for (const d of dirs) if (d) rmSync(join(d, '..'), { recursive: true, force: true });
}

/**
 * --nice: other sessions' compiles on a shared box otherwise show up as our latency. With the kernel's
 * autogroup scheduling, a process's nice only ranks it inside its own session's group, so the group's nice
 * is raised too (it is ours: the bench's session), and put back afterwards. Returns the undo.
 */
export function raisePriority(pids: number[], log: (msg: string) => void): () => void {
  for (const pid of pids) {
    try {
      execFileSync('renice', ['-n', '-15', '-p', String(pid)], { stdio: 'ignore' });
    } catch {
      log(`renice ${pid} failed (needs root); running at normal priority`);
    }
  }
  const file = `/proc/${process.pid}/autogroup`;
  try {
    const before = /nice (-?\d+)/.exec(readFileSync(file, 'utf8'))?.[1] ?? '0';
    writeFileSync(file, '-15');
    const undo = (): void => writeFileSync(file, before);
    process.once('exit', undo); // also when the run fails half-way
    process.once('SIGINT', () => process.exit(130));
    return undo;
  } catch {
    return () => undefined; // no autogroup scheduling here
  }
}
