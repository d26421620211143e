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
   * 30 s without traffic (src/memory.ts), never between the bench's steps.
   */
  quietMs: number;
  build: boolean;
  keyrelay: boolean;
  profile: boolean;
  pin: boolean;
  nice: boolean;
  /** Extra KEYRELAY_* settings for both keyrelay processes (--env NAME=VALUE, repeatable). */
  env: Record<string, string>;
  out: string | null;
}

const HELP = `usage: npm run bench -- [--quick] [--reps N] [--no-build] [--no-keyrelay] [--profile] [--pin] [--nice] [--env N=V] [--out FILE]
  --quick        one repetition of short runs (~1 min)
  --reps N       repetitions per measurement (median reported; default 3)
  --no-build     skip \`tsc -p tsconfig.build.json\` (use the existing dist/)
  --no-keyrelay  harness only: direct and bare node proxy columns
  --profile      run keyrelay (logging on) under node --cpu-prof and print its top functions
  --pin          pin proxies to CPU 1, driver and fake upstream to CPU 0 (taskset)
  --nice         run the bench's processes at nice -15 (root): steadier numbers on a busy shared machine
  --env N=V      extra setting for keyrelay, e.g. --env KEYRELAY_LOG_BATCH_SIZE=100 (repeatable)
  --out FILE     JSON output path (default bench/results/<timestamp>.json)`;

export function parseOptions(argv: string[]): Options {
  const quick = argv.includes('--quick');
  const o: Options = {
    quick,
    reps: quick ? 1 : 3,
    warmupMs: quick ? 700 : 2000,
    openMs: quick ? 1500 : 3000,
    rates: [500, 2000],
    saturationMs: quick ? 2000 : 4000,
    saturationConcurrency: 64,
    streamMs: quick ? 1200 : 2500,
    streamConcurrency: [1, 64],
    streamChunks: 50,
    streamChunkMs: 2,
    slowStreams: 1000,
    slowChunks: quick ? 8 : 12,
    slowChunkMs: 500,
    quietMs: 33_000,
    build: true,
    keyrelay: true,
    profile: false,
    pin: false,
    nice: false,
    env: {},
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
    else if (a === '--nice') o.nice = true;
    else if (a === '--env' && /^KEYRELAY_\w+=/.test(argv[i + 1] ?? '')) {
      const [name, ...value] = argv[++i]!.split('=');
      o.env[name!] = value.join('=');
    } else if (a === '--out') o.out = argv[++i] ?? null;
    else {
      console.log(HELP);
      process.exit(a === '--help' || a === '-h' ? 0 : 2);
    }
  }
  return o;
}
