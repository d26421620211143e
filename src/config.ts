/**
 * The only reader of process.env. Parsed and validated once at start, then frozen; an invalid value stops
 * the start with a message naming the variable.
 */
import { z } from 'zod';
import type { GuardLimits } from './http-guard.js';

/** KEYRELAY_LOG_BATCH_BODY_CHARS' default (8 Mi characters); also the SQLite writer's when it is given none. */
export const DEFAULT_LOG_BATCH_BODY_CHARS = 8 * 2 ** 20;

/**
 * KEYRELAY_LOG_READER_IDLE_MS' default. The SQLite log's query thread is started by the console, the hourly
 * prune and the batch ledger; a start costs ~30 ms of CPU, an idle thread several MB.
 */
export const DEFAULT_LOG_READER_IDLE_MS = 30_000;

const int = (min: number, max = Number.MAX_SAFE_INTEGER) => z.coerce.number().int().min(min).max(max);
const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no', 'on', 'off'])
  .transform((v) => v === 'true' || v === '1' || v === 'yes' || v === 'on');
const origin = z
  .string()
  .url()
  .refine((u) => /^https?:$/.test(new URL(u).protocol), 'must be an http(s) URL')
  .refine((u) => {
    const p = new URL(u);
    return (p.pathname === '/' || p.pathname === '') && !p.search && !p.hash && !p.username;
  }, 'must be an origin (scheme://host[:port]) with no path, query or credentials')
  .transform((u) => new URL(u).origin);

/** Variable name → schema. Defaults fit long LLM streams: minutes, not seconds. */
const schema = z.object({
  KEYRELAY_HOST: z.string().min(1).default('127.0.0.1'),
  KEYRELAY_PORT: int(0, 65535).default(8080),
  KEYRELAY_PUBLIC_URL: z.string().url().optional(),
  KEYRELAY_OPENAI_UPSTREAM: origin.default('https://api.openai.com'),
  KEYRELAY_ANTHROPIC_UPSTREAM: origin.default('https://api.anthropic.com'),
  KEYRELAY_DATA_DIR: z.string().min(1).default('./data'),
  KEYRELAY_DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL')
    .optional(),
  KEYRELAY_REDIS_URL: z
    .string()
    .regex(/^rediss?:\/\//, 'must be a redis:// URL')
    .optional(),
  KEYRELAY_SIGNUP: z.enum(['open', 'invite', 'closed']).default('open'),
  KEYRELAY_BODY_LOG_BYTES: int(0).default(65536),
  KEYRELAY_MAX_BODY_BYTES: int(1).default(33554432),
  KEYRELAY_CONNECT_TIMEOUT_MS: int(1).default(10_000),
  /**
   * How long an idle upstream connection is kept for reuse, at most. A provider's Keep-Alive hint can
   * shorten it, not lengthen it (undici alone follows a hint up to 10 minutes).
   */
  KEYRELAY_UPSTREAM_KEEPALIVE_MS: int(1).default(30_000),
  /** Until upstream response headers: non-streaming reasoning calls can think for minutes. */
  KEYRELAY_HEADERS_TIMEOUT_MS: int(1).default(600_000),
  /** Longest silence between two body chunks of an upstream response. */
  KEYRELAY_IDLE_TIMEOUT_MS: int(1).default(300_000),
  KEYRELAY_KEY_CACHE_TTL_MS: int(0).default(30_000),
  KEYRELAY_OPENAI_STREAM_USAGE: bool.default(true),
  /** false turns the request log off entirely (benchmarks; privacy-sensitive deployments). */
  KEYRELAY_REQUEST_LOG: bool.default(true),
  KEYRELAY_RETENTION_DAYS: int(0).default(30),
  KEYRELAY_BODY_RETENTION_DAYS: int(0).optional(),
  /**
   * Rows per log write, at most (a batch is what the queue holds, up to this). Neither store writes on the
   * event loop's time: PostgreSQL is a round trip, and SQLite's synchronous driver runs in a worker thread
   * (store/sqlite/log-writer.ts) that writes a batch in one transaction, cheaper per row the larger it is
   * (docs/performance.md, "Third pass"). Under light load batches stay small: KEYRELAY_LOG_FLUSH_MS sends them.
   */
  KEYRELAY_LOG_BATCH_SIZE: int(1, 10_000).default(500),
  /**
   * Body text per log write, at most (characters; a write holds at least one row): what bounds a batch when
   * rows carry large bodies, and what the SQLite writer's heap is sized for (store/sqlite/log-writer.ts).
   */
  KEYRELAY_LOG_BATCH_BODY_CHARS: int(1).default(DEFAULT_LOG_BATCH_BODY_CHARS),
  KEYRELAY_LOG_FLUSH_MS: int(1).default(100),
  KEYRELAY_LOG_WRITER_IDLE_MS: int(100).default(600_000),
  KEYRELAY_LOG_READER_IDLE_MS: int(100).default(DEFAULT_LOG_READER_IDLE_MS),
  /**
   * SQLite's page cache, per connection (the log writer's, the console's reads, the config store's). 2 MB is
   * SQLite's own default and node:sqlite's; better-sqlite3 (Node 20) is built with 16 MB, which the writer
   * filled under load for no measured gain in its inserts (docs/performance.md, "Sixth pass").
   */
  KEYRELAY_SQLITE_CACHE_MB: int(1, 4096).default(2),
  /** V8's allocation-site pretenuring, which `serve` turns off (src/cli/v8-policy.ts); true keeps it. */
  KEYRELAY_V8_PRETENURING: bool.default(false),
  KEYRELAY_LOG_QUEUE_MAX: int(1).default(100_000),
  /** Body text the queue holds while the store is unavailable (characters); later rows queue without bodies. */
  KEYRELAY_LOG_QUEUE_MAX_BODY_CHARS: int(0).default(256 * 2 ** 20),
  /**
   * The request log's full-text index (console search). Off: cheaper log writes (docs/performance.md), and
   * search scans the newest KEYRELAY_LOG_SEARCH_SCAN_ROWS rows per page instead. Changing either search
   * setting rebuilds or drops the index at the next start; rows are kept.
   */
  KEYRELAY_LOG_SEARCH: bool.default(true),
  KEYRELAY_LOG_SEARCH_BODY_CHARS: int(0, 1_000_000).default(8192),
  KEYRELAY_LOG_SEARCH_SCAN_ROWS: int(1, 10_000_000).default(10_000),
  KEYRELAY_DRAIN_TIMEOUT_MS: int(0).default(30_000),
  KEYRELAY_TRUST_PROXY: bool.default(false),
  KEYRELAY_SESSION_IDLE_HOURS: int(1).default(24),
  KEYRELAY_LOGIN_WINDOW_MINUTES: int(1).default(15),
  KEYRELAY_LOGIN_MAX_PER_EMAIL: int(1).default(5),
  KEYRELAY_LOGIN_MAX_PER_IP: int(1).default(20),
  KEYRELAY_SESSION_MAX_DAYS: int(1).default(14),
  // WebSockets (src/proxy/websocket/): largest message either way, silence before closing, buffering per
  // direction (pause the sending side above the high-water mark, close both above the cap).
  KEYRELAY_WS_MAX_MESSAGE_BYTES: int(1).default(16 * 1024 * 1024),
  KEYRELAY_WS_IDLE_TIMEOUT_MS: int(1).default(600_000),
  KEYRELAY_WS_HIGH_WATER_BYTES: int(1).default(1024 * 1024),
  KEYRELAY_WS_MAX_BUFFER_BYTES: int(1).default(32 * 1024 * 1024),
  KEYRELAY_LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  // What a client may hold before its request is in (docs/threat-model.md); never applies to responses.
  KEYRELAY_CLIENT_HEADERS_TIMEOUT_MS: int(1).default(20_000),
  /** A 32 MiB body at ~2.5 Mbit/s; slower uploads are not what a gateway in front of an API serves. */
  KEYRELAY_CLIENT_REQUEST_TIMEOUT_MS: int(1).default(120_000),
  KEYRELAY_CLIENT_BODY_IDLE_TIMEOUT_MS: int(1).default(15_000),
  /** Unset: 10,000 or 80 % of the descriptor limit, whichever is lower. */
  KEYRELAY_MAX_CONNECTIONS: int(1).optional(),
  /** Not applied to 127.0.0.1 / ::1, nor with KEYRELAY_TRUST_PROXY (all connections come from the proxy). */
  KEYRELAY_MAX_CONNECTIONS_PER_IP: int(0).default(512),
  /** Node itself keeps only ~1,000 and silently drops the rest. */
  KEYRELAY_MAX_HEADERS: int(1, 1000).default(100),
  /**
   * Decoded bytes of a compressed response read for usage; a decompression bomb stops here. Decoding is
   * synchronous (~100 ms for 32 MiB of brotli): every other request waits that long.
   */
  KEYRELAY_USAGE_DECODE_BYTES: int(1).default(32 * 1024 * 1024),
  /** Largest SSE event held whole, for usage or for the OpenAI stream-usage rewrite. */
  KEYRELAY_SSE_EVENT_BYTES: int(1024).default(2 * 1024 * 1024),
  // Hard budgets (docs/limits.md): output reserved for a request that names no maximum; unpriced calls
  // refused or counted at 0; how long a crashed instance's reservations and in-flight slots outlive it.
  KEYRELAY_BUDGET_DEFAULT_OUTPUT_TOKENS: int(0, 10_000_000).default(4096),
  KEYRELAY_HARD_BUDGET_UNPRICED: z.enum(['refuse', 'allow']).default('refuse'),
  KEYRELAY_LIMIT_HOLD_TTL_MS: int(1_000).default(60_000),
  // Operational log format: auto = readable lines on a terminal, JSON lines otherwise.
  KEYRELAY_LOG_FORMAT: z.enum(['auto', 'json', 'pretty']).default('auto'),
});

export type Env = z.input<typeof schema>;

export interface Config {
  host: string;
  port: number;
  publicUrl: string;
  upstreams: { openai: string; anthropic: string };
  dataDir: string;
  databaseUrl: string | null;
  redisUrl: string | null;
  signup: 'open' | 'invite' | 'closed';
  bodyLogBytes: number;
  maxBodyBytes: number;
  connectTimeoutMs: number;
  upstreamKeepAliveMs: number;
  headersTimeoutMs: number;
  idleTimeoutMs: number;
  keyCacheTtlMs: number;
  openaiStreamUsage: boolean;
  requestLog: boolean;
  retentionDays: number;
  bodyRetentionDays: number;
  logBatchSize: number;
  logBatchBodyChars: number;
  logFlushMs: number;
  /** SQLite: how long the log writer's thread outlives its last write. */
  logWriterIdleMs: number;
  /** SQLite: how long the thread the log is queried on outlives its last query. */
  logReaderIdleMs: number;
  /** SQLite: each connection's page cache, MB. */
  sqliteCacheMb: number;
  /** `serve`: keep V8's allocation-site pretenuring. */
  v8Pretenuring: boolean;
  logQueueMax: number;
  logQueueMaxBodyChars: number;
  logSearch: { enabled: boolean; bodyChars: number; scanRows: number };
  drainTimeoutMs: number;
  trustProxy: boolean;
  sessionIdleMs: number;
  /** Console sign-in and sign-up throttling: attempts per email and per client IP within the window. */
  loginThrottle: { windowMs: number; maxPerEmail: number; maxPerIp: number };
  sessionMaxMs: number;
  logLevel: string;
  ws: { maxMessageBytes: number; idleTimeoutMs: number; highWaterBytes: number; maxBufferBytes: number };
  logFormat: 'auto' | 'json' | 'pretty';
  /** Cookies get `Secure` when the console is served over HTTPS. */
  secureCookies: boolean;
  guard: Readonly<GuardLimits>;
  usageDecodeBytes: number;
  sseEventBytes: number;
  limits: { defaultOutputTokens: number; unpriced: 'refuse' | 'allow'; holdTtlMs: number };
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** The address a server bound to host:port answers on (IPv6 hosts in brackets): the default public URL. */
export function localUrl(host: string, port: number): string {
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/** Parses a variable map (process.env by default, overrides win); throws ConfigError naming the variable. */
export function loadConfig(
  env: Record<string, string | undefined> = process.env,
  overrides: Record<string, string | undefined> = {},
): Readonly<Config> {
  const raw: Record<string, string> = {};
  for (const key of Object.keys(schema.shape)) {
    const v = overrides[key] ?? env[key];
    if (v !== undefined && v !== '') raw[key] = v;
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    const msgs = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`invalid configuration: ${msgs.join('; ')}`);
  }
  const e = parsed.data;
  const publicUrl = (e.KEYRELAY_PUBLIC_URL ?? localUrl(e.KEYRELAY_HOST, e.KEYRELAY_PORT)).replace(/\/+$/, '');
  return Object.freeze({
    host: e.KEYRELAY_HOST,
    port: e.KEYRELAY_PORT,
    publicUrl,
    upstreams: Object.freeze({
      openai: e.KEYRELAY_OPENAI_UPSTREAM,
      anthropic: e.KEYRELAY_ANTHROPIC_UPSTREAM,
    }),
    dataDir: e.KEYRELAY_DATA_DIR,
    databaseUrl: e.KEYRELAY_DATABASE_URL ?? null,
    redisUrl: e.KEYRELAY_REDIS_URL ?? null,
    signup: e.KEYRELAY_SIGNUP,
    bodyLogBytes: e.KEYRELAY_BODY_LOG_BYTES,
    maxBodyBytes: e.KEYRELAY_MAX_BODY_BYTES,
    connectTimeoutMs: e.KEYRELAY_CONNECT_TIMEOUT_MS,
    upstreamKeepAliveMs: e.KEYRELAY_UPSTREAM_KEEPALIVE_MS,
    headersTimeoutMs: e.KEYRELAY_HEADERS_TIMEOUT_MS,
    idleTimeoutMs: e.KEYRELAY_IDLE_TIMEOUT_MS,
    keyCacheTtlMs: e.KEYRELAY_KEY_CACHE_TTL_MS,
    openaiStreamUsage: e.KEYRELAY_OPENAI_STREAM_USAGE,
    requestLog: e.KEYRELAY_REQUEST_LOG,
    retentionDays: e.KEYRELAY_RETENTION_DAYS,
    bodyRetentionDays: e.KEYRELAY_BODY_RETENTION_DAYS ?? e.KEYRELAY_RETENTION_DAYS,
    logBatchSize: e.KEYRELAY_LOG_BATCH_SIZE,
    logBatchBodyChars: e.KEYRELAY_LOG_BATCH_BODY_CHARS,
    logFlushMs: e.KEYRELAY_LOG_FLUSH_MS,
    logWriterIdleMs: e.KEYRELAY_LOG_WRITER_IDLE_MS,
    logReaderIdleMs: e.KEYRELAY_LOG_READER_IDLE_MS,
    sqliteCacheMb: e.KEYRELAY_SQLITE_CACHE_MB,
    v8Pretenuring: e.KEYRELAY_V8_PRETENURING,
    logQueueMax: e.KEYRELAY_LOG_QUEUE_MAX,
    logQueueMaxBodyChars: e.KEYRELAY_LOG_QUEUE_MAX_BODY_CHARS,
    logSearch: {
      enabled: e.KEYRELAY_LOG_SEARCH,
      bodyChars: e.KEYRELAY_LOG_SEARCH_BODY_CHARS,
      scanRows: e.KEYRELAY_LOG_SEARCH_SCAN_ROWS,
    },
    drainTimeoutMs: e.KEYRELAY_DRAIN_TIMEOUT_MS,
    trustProxy: e.KEYRELAY_TRUST_PROXY,
    sessionIdleMs: e.KEYRELAY_SESSION_IDLE_HOURS * 3_600_000,
    loginThrottle: {
      windowMs: e.KEYRELAY_LOGIN_WINDOW_MINUTES * 60_000,
      maxPerEmail: e.KEYRELAY_LOGIN_MAX_PER_EMAIL,
      maxPerIp: e.KEYRELAY_LOGIN_MAX_PER_IP,
    },
    sessionMaxMs: e.KEYRELAY_SESSION_MAX_DAYS * 86_400_000,
    logLevel: e.KEYRELAY_LOG_LEVEL,
    ws: Object.freeze({
      maxMessageBytes: e.KEYRELAY_WS_MAX_MESSAGE_BYTES,
      idleTimeoutMs: e.KEYRELAY_WS_IDLE_TIMEOUT_MS,
      highWaterBytes: e.KEYRELAY_WS_HIGH_WATER_BYTES,
      maxBufferBytes: e.KEYRELAY_WS_MAX_BUFFER_BYTES,
    }),
    logFormat: e.KEYRELAY_LOG_FORMAT,
    secureCookies: publicUrl.startsWith('https:'),
    guard: Object.freeze({
      clientHeadersTimeoutMs: e.KEYRELAY_CLIENT_HEADERS_TIMEOUT_MS,
      clientRequestTimeoutMs: Math.max(
        e.KEYRELAY_CLIENT_REQUEST_TIMEOUT_MS,
        e.KEYRELAY_CLIENT_HEADERS_TIMEOUT_MS,
      ),
      clientBodyIdleTimeoutMs: e.KEYRELAY_CLIENT_BODY_IDLE_TIMEOUT_MS,
      maxConnections: e.KEYRELAY_MAX_CONNECTIONS ?? null,
      maxConnectionsPerIp: e.KEYRELAY_MAX_CONNECTIONS_PER_IP,
      maxHeaders: e.KEYRELAY_MAX_HEADERS,
      trustProxy: e.KEYRELAY_TRUST_PROXY,
    }),
    usageDecodeBytes: e.KEYRELAY_USAGE_DECODE_BYTES,
    sseEventBytes: e.KEYRELAY_SSE_EVENT_BYTES,
    limits: Object.freeze({
      defaultOutputTokens: e.KEYRELAY_BUDGET_DEFAULT_OUTPUT_TOKENS,
      unpriced: e.KEYRELAY_HARD_BUDGET_UNPRICED,
      holdTtlMs: e.KEYRELAY_LIMIT_HOLD_TTL_MS,
    }),
  });
}
