/** Command-line options of `npm run bench`; `--quick` is a ~1 minute smoke run of the same steps. */
export interface Options {
  quick: boolean;
  reps: number;
  warmupMs: number;
  openMs: number;
  rates: number[];
  saturationMs: number;
  saturationConcurrency: number;
  streamMs: number;
  streamConcurrency: number[];
  streamChunks: number;
  streamChunkMs: number;
  slowStreams: number;
  slowChunks: number;
  slowChunkMs: number;
  /**
   * How long a process is left without requests before its idle and after-load RSS are read. A server's
   * "idle" is a while without traffic, not the moment after a request: keyrelay gives memory back after
   * 30 s without traffic (src/cli/memory.ts), never between the bench's steps.
   */
  quietMs: number;
  build: boolean;
  keyrelay: boolean;
  /** Whole-run --cpu-prof of keyrelay (the old top-functions view); perturbs keyrelay's own numbers. */
  profile: boolean;
  /** The per-stage profile: a separate profiled keyrelay, saturated after the measured steps. */
  stages: boolean;
  /** Only the per-stage profile (no measured steps, no idle waits). */
  stagesOnly: boolean;
  stageMs: number;
  pin: boolean;
  /** A keyrelay column with KEYRELAY_LOG_SEARCH=false: no full-text index (--no-fts-column to leave it out). */
  noSearchColumn: boolean;
  /** A keyrelay column whose key has a hard budget and a TPM limit (--no-limits-column to leave it out). */
  limitsColumn: boolean;
  /**
   * A keyrelay column exporting OpenTelemetry (OTLP/HTTP protobuf, the SDK's default batching) to a local
   * collector that answers at once (--otel): export on beside the same keyrelay with it off.
   */
  otel: boolean;
  /** Also run bench/websocket.ts afterwards. */
  ws: boolean;
  nice: boolean;
  /** The node binary both proxies (bare and keyrelay) run on (--node); the bench's own by default. */
  node: string;
  /** Extra node flags for keyrelay (--node-flag, repeatable), e.g. --max-semi-space-size=4. */
  nodeFlags: string[];
  /**
   * Another checkout with keyrelay built in its dist/ (--baseline DIR): run as the "kr baseline" column beside
   * this one, as shipped, so a change is measured before and after in one run on the same machine.
   */
  baseline: string | null;
  /** Extra environment for both keyrelay processes (--env NAME=VALUE, repeatable). */
  env: Record<string, string>;
  out: string | null;
}

const HELP = `usage: npm run bench -- [--quick] [--reps N] [--rates A,B] [--streams A,B] [--no-build] [--no-keyrelay] [--no-stages] [--stages-only] [--profile] [--no-pin] [--no-fts-column] [--no-limits-column] [--otel] [--ws] [--views] [--nice] [--node PATH] [--node-flag F] [--env N=V] [--baseline DIR] [--out FILE]
  --quick        one repetition of short runs (~2 min with the two 33 s idle waits)
  --reps N       repetitions per measurement (median reported; default 3)
  --rates A,B    fixed request rates of the open-loop latency steps (default 2000)
  --streams A,B  concurrent streams of the streaming steps (default 64)
  --no-build     skip \`tsc -p tsconfig.build.json\` (use the existing dist/)
  --no-keyrelay  harness only: direct and bare node proxy columns
  --no-stages    skip the per-stage CPU profile (a separate profiled keyrelay saturated at the end)
  --stages-only  only the per-stage profile (~1 min)
  --profile      also run the measured keyrelay under node --cpu-prof and print its top functions
  --no-pin       do not pin: by default every proxy runs on CPU 1 alone (taskset, all its threads),
                 the driver and the fake upstream on CPU 0
  --no-fts-column  leave out the "kr no-FTS" column (keyrelay with KEYRELAY_LOG_SEARCH=false)
  --no-limits-column  leave out the "kr limits" column (keyrelay whose key has a hard budget and a
                 tokens-per-minute limit, both far from reached)
  --otel         add the "kr otel" column: keyrelay exporting OpenTelemetry traces and metrics to a
                 local OTLP/HTTP collector (bench/otlp-sink.ts); the notes give export on − off
  --ws           also run the WebSocket bench (npm run bench:ws) afterwards
  --views        only the console views bench (bench/views.ts: each view over a million rows on SQLite
                 and PostgreSQL, and the proxy's p99 beside them); --views --help lists its options
  --nice         run the bench's processes at nice -15 (root): steadier numbers on a busy shared machine
  --node PATH    node binary for both proxies, e.g. /opt/node24/node_modules/node/bin/node
  --node-flag F  extra node flag for keyrelay, e.g. --node-flag --max-semi-space-size=4 (repeatable)
  --env N=V      extra environment for keyrelay, e.g. --env KEYRELAY_REQUEST_LOG=false (repeatable)
  --baseline DIR  a "kr baseline" column: keyrelay built in another checkout, e.g. the commit before a
                 change: git worktree add /tmp/base HEAD~1 && cd /tmp/base && npm ci && npm run build
  --out FILE     JSON output path (default bench/results/<timestamp>.json)`;

export function parseOptions(argv: string[]): Options {
  const quick = argv.includes('--quick');
  const o: Options = {
    quick,
    reps: quick ? 1 : 3,
    warmupMs: quick ? 700 : 2000,
    openMs: quick ? 1500 : 3000,
    rates: [2000],
    saturationMs: quick ? 2000 : 4000,
    saturationConcurrency: 64,
    streamMs: quick ? 1200 : 2500,
    streamConcurrency: [64],
    streamChunks: 50,
    streamChunkMs: 2,
    slowStreams: 1000,
    slowChunks: quick ? 8 : 12,
    slowChunkMs: 500,
    quietMs: 33_000,
    build: true,
    keyrelay: true,
    profile: false,
    stages: true,
    stagesOnly: false,
    stageMs: quick ? 3000 : 5000,
    pin: true,
    ws: false,
    noSearchColumn: true,
    limitsColumn: true,
    otel: false,
    nice: false,
    env: {},
    node: process.execPath,
    nodeFlags: [],
    baseline: null,
    out: null,
  };
  for (let i = 0; i < argv.length; i += 1) {
    const a = argv[i];
    if (a === '--quick') continue;
    else if (a === '--reps') o.reps = Math.max(1, Number(argv[++i]) || 1);
    else if (a === '--no-build') o.build = false;
    else if (a === '--no-keyrelay') o.keyrelay = false;
    else if (a === '--profile') o.profile = true;
    else if (a === '--pin') o.pin = true;
    else if (a === '--no-pin') o.pin = false;
    else if (a === '--node' && argv[i + 1]) o.node = argv[++i]!;
    else if (a === '--node-flag' && argv[i + 1]?.startsWith('--')) o.nodeFlags.push(argv[++i]!);
    else if (a === '--baseline' && argv[i + 1]) o.baseline = argv[++i]!;
    else if (a === '--no-stages') o.stages = false;
    else if (a === '--stages-only') o.stagesOnly = true;
    else if (a === '--ws') o.ws = true;
    else if (a === '--no-fts-column') o.noSearchColumn = false;
    else if (a === '--no-limits-column') o.limitsColumn = false;
    else if (a === '--otel') o.otel = true;
    else if (a === '--rates') o.rates = numbers(argv[++i]);
    else if (a === '--streams') o.streamConcurrency = numbers(argv[++i]);
    else if (a === '--nice') o.nice = true;
    else if (a === '--env' && /^[A-Z_][A-Z0-9_]*=/.test(argv[i + 1] ?? '')) {
      const [name, ...value] = argv[++i]!.split('=');
      o.env[name!] = value.join('=');
    } else if (a === '--out') o.out = argv[++i] ?? null;
    else {
      console.log(HELP);
      process.exit(a === '--help' || a === '-h' ? 0 : 2);
    }
  }
  if (o.stagesOnly) Object.assign(o, { rates: [], reps: 0, streamConcurrency: [], quietMs: 0, stages: true });
  return o;
}

function numbers(list: string | undefined): number[] {
  const out = (list ?? '')
    .split(',')
    .map(Number)
    .filter((n) => Number.isInteger(n) && n > 0);
  if (out.length === 0) {
    console.log(HELP);
    process.exit(2);
  }
  return out;
}
