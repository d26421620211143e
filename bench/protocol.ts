/** Messages between the bench parent (run.ts) and the load driver process (driver.ts), over fork IPC. */
export type ProviderName = 'openai' | 'anthropic';

/** Where and how the driver sends requests: the same shape for direct, bare proxy and keyrelay. */
export interface Target {
  name: string;
  origin: string; // http://127.0.0.1:<port>
  paths: Record<ProviderName, string>;
  headers: Record<ProviderName, Record<string, string>>;
}

export type Job =
  | { kind: 'open'; target: Target; rate: number; durationMs: number }
  | { kind: 'closed'; target: Target; concurrency: number; durationMs: number }
  | {
      kind: 'stream';
      target: Target;
      provider: ProviderName;
      concurrency: number;
      durationMs: number;
      chunks: number;
      chunkMs: number;
    }
  | {
      kind: 'hold';
      target: Target;
      provider: ProviderName;
      count: number;
      chunks: number;
      chunkMs: number;
    };

/** p50/p90/p99/max in milliseconds, plus how many samples they came from. */
export interface Summary {
  n: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

export interface DriverSelf {
  /** Driver CPU time over the job as a share of one core: near 1 means the driver itself was the limit. */
  cpuShare: number;
  eventLoopP99Ms: number;
}

/** One request of an open-loop step's slowest 1 %: when it was due (epoch ms) and how long it took. */
export interface SlowRequest {
  at: number;
  ms: number;
}

export interface OpenResult {
  kind: 'open';
  sent: number;
  ok: number;
  errors: number;
  achievedRps: number;
  /** Intended send time → response end: includes queueing, so coordinated omission does not hide stalls. */
  latency: Summary;
  /** Actual send → response end. */
  service: Summary;
  /** How late the timer fired against the schedule (driver-side noise, same for every target). */
  scheduleLag: Summary;
  /** The requests at or over the latency p99 (tail.ts accounts for their time). */
  slowest: SlowRequest[];
  driver: DriverSelf;
}

export interface ClosedResult {
  kind: 'closed';
  ok: number;
  errors: number;
  rps: number;
  latency: Summary;
  driver: DriverSelf;
}

export interface StreamResult {
  kind: 'stream';
  streams: number;
  errors: number;
  ttfb: Summary;
  ttlb: Summary;
  chunksPerStream: number;
  driver: DriverSelf;
}

export interface HoldResult {
  kind: 'hold';
  opened: number;
  completed: number;
  errors: number;
  openMs: number;
  driver: DriverSelf;
}

export type JobResult = OpenResult | ClosedResult | StreamResult | HoldResult;

export type DriverRequest = { id: number; job: Job };
export type DriverMessage =
  | { id: number; result: JobResult; errorSample: string | null }
  | { id: number; error: string }
  | { id: number; event: 'all-open' };

/** Query parameters the fake upstream reads; keyrelay forwards the query string unchanged. */
export function upstreamQuery(chunks: number, chunkMs: number): string {
  return `?chunks=${chunks}&chunk_ms=${chunkMs}`;
}

/** The request bodies: a small chat completion, non-streaming and streaming, per provider. */
export const BODIES: Record<ProviderName, { plain: string; stream: string }> = {
  openai: {
    plain: '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello."}],"max_tokens":16}',
    stream:
      '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello."}],"max_tokens":64,' +
      '"stream":true,"stream_options":{"include_usage":true}}',
  },
  anthropic: {
    plain:
      '{"model":"claude-3-5-haiku-20241022","max_tokens":16,"messages":[{"role":"user","content":"Say hello."}]}',
    stream:
      '{"model":"claude-3-5-haiku-20241022","max_tokens":64,"messages":[{"role":"user","content":"Say hello."}],' +
      '"stream":true}',
  },
};
