/**
 * The only reader of process.env. Parsed and validated once at start, then frozen; an invalid value stops
 * the start with a message naming the variable.
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import {
  CLIENT_BODY_IDLE_TIMEOUT_MS,
  CLIENT_HEADERS_TIMEOUT_MS,
  MAX_HEADERS,
  type GuardLimits,
} from './http-guard.js';
import { adminKeysFrom, type AdminKeys } from './reconcile/admin-keys.js';
import { readTelemetrySettings, type TelemetrySettings } from './telemetry/settings.js';
import { parseUpstreams, type NamedUpstream } from './providers/upstream-config.js';
import { WS_HIGH_WATER_BYTES, WS_IDLE_TIMEOUT_MS, WS_MAX_BUFFER_BYTES } from './proxy/websocket/relay.js';

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

/**
 * Variable name → schema: everything an operator may need to set, grouped as the README's Configuration
 * section groups them. Defaults fit long LLM streams: minutes, not seconds. Internal tuning is a named
 * constant in the module it tunes, not a variable.
 */
const schema = z.object({
  // Server
  KEYRELAY_HOST: z.string().min(1).default('127.0.0.1'),
  KEYRELAY_PORT: int(0, 65535).default(8080),
  KEYRELAY_PUBLIC_URL: z.string().url().optional(),
  KEYRELAY_OPENAI_UPSTREAM: origin.default('https://api.openai.com'),
  KEYRELAY_ANTHROPIC_UPSTREAM: origin.default('https://api.anthropic.com'),
  /** Named upstreams (providers/upstream-config.ts): JSON, or the path of a JSON file. */
  KEYRELAY_UPSTREAMS: z.string().optional(),
  KEYRELAY_DRAIN_TIMEOUT_MS: int(0).default(30_000),
  // Storage
  KEYRELAY_DATA_DIR: z.string().min(1).default('./data'),
  KEYRELAY_DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL')
    .optional(),
  KEYRELAY_REDIS_URL: z
    .string()
    .regex(/^rediss?:\/\//, 'must be a redis:// URL')
    .optional(),
  KEYRELAY_RETENTION_DAYS: int(0).default(30),
  // Log
  /** false turns the request log off entirely (benchmarks; privacy-sensitive deployments). */
  KEYRELAY_REQUEST_LOG: bool.default(true),
  KEYRELAY_BODY_LOG_BYTES: int(0).default(65536),
  /**
   * The request log's full-text index (console search). Off: cheaper log writes (docs/performance.md), and
   * search scans the newest rows instead. Changing it rebuilds or drops the index at the next start.
   */
  KEYRELAY_LOG_SEARCH: bool.default(true),
  KEYRELAY_LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  // Operational log format: auto = readable lines on a terminal, JSON lines otherwise.
  KEYRELAY_LOG_FORMAT: z.enum(['auto', 'json', 'pretty']).default('auto'),
  // Limits
  KEYRELAY_MAX_BODY_BYTES: int(1).default(33554432),
  /** Until upstream response headers: non-streaming reasoning calls can think for minutes. */
  KEYRELAY_HEADERS_TIMEOUT_MS: int(1).default(600_000),
  /** Longest silence between two body chunks of an upstream response. */
  KEYRELAY_IDLE_TIMEOUT_MS: int(1).default(300_000),
  /** A 32 MiB body at ~2.5 Mbit/s; slower uploads are not what a gateway in front of an API serves. */
  KEYRELAY_CLIENT_REQUEST_TIMEOUT_MS: int(1).default(120_000),
  /** Unset: 10,000 or 80 % of the descriptor limit, whichever is lower. */
  KEYRELAY_MAX_CONNECTIONS: int(1).optional(),
  /** Not applied to 127.0.0.1 / ::1, nor with KEYRELAY_TRUST_PROXY (all connections come from the proxy). */
  KEYRELAY_MAX_CONNECTIONS_PER_IP: int(0).default(512),
  // Security
  KEYRELAY_SIGNUP: z.enum(['open', 'invite', 'closed']).default('open'),
  KEYRELAY_TRUST_PROXY: bool.default(false),
  // WebSockets (src/proxy/websocket/): largest message either way.
  KEYRELAY_WS_MAX_MESSAGE_BYTES: int(1).default(16 * 1024 * 1024),
});

/** The keyrelay variables set in this environment that keyrelay does not read (removed, or misspelt). */
export function unknownVariables(env: Record<string, string | undefined> = process.env): string[] {
  return Object.keys(env)
    .filter((name) => name.startsWith('KEYRELAY') && !(name in schema.shape) && env[name] !== '')
    .sort();
}

/** glibc's malloc settings in the environment (MALLOC_*_, GLIBC_TUNABLES), judged by cli/memory.ts. */
export function mallocVariables(
  env: Record<string, string | undefined> = process.env,
): Record<string, string | undefined> {
  return Object.fromEntries(
    Object.entries(env).filter(([name]) => name.startsWith('MALLOC_') || name === 'GLIBC_TUNABLES'),
  );
}

export type Env = z.input<typeof schema>;

export interface Config {
  host: string;
  port: number;
  publicUrl: string;
  /** Each provider's origin, by id: the built-ins' and the named upstreams'. */
  upstreams: Readonly<Record<string, string>>;
  /** KEYRELAY_UPSTREAMS, checked: the providers it adds (registered at start, providers/index.ts). */
  namedUpstreams: readonly NamedUpstream[];
  dataDir: string;
  databaseUrl: string | null;
  redisUrl: string | null;
  signup: 'open' | 'invite' | 'closed';
  bodyLogBytes: number;
  maxBodyBytes: number;
  headersTimeoutMs: number;
  idleTimeoutMs: number;
  requestLog: boolean;
  retentionDays: number;
  /**
   * The full-text index on or off. `bodyChars` and `scanRows` are never set from the environment (the
   * stores' own constants apply); a test may set them.
   */
  logSearch: { enabled: boolean; bodyChars?: number; scanRows?: number };
  drainTimeoutMs: number;
  trustProxy: boolean;
  logLevel: string;
  ws: { maxMessageBytes: number; idleTimeoutMs: number; highWaterBytes: number; maxBufferBytes: number };
  logFormat: 'auto' | 'json' | 'pretty';
  /** Cookies get `Secure` when the console is served over HTTPS. */
  secureCookies: boolean;
  guard: Readonly<GuardLimits>;
  /** `defaultOutputTokens` and `holdTtlMs` are the limiter's constants unless a test sets them. */
  limits: { defaultOutputTokens?: number; holdTtlMs?: number };
  /** OpenTelemetry export from the standard OTEL_* variables (telemetry/settings.ts); null: off. */
  telemetry: Readonly<TelemetrySettings> | null;
  /** The providers' admin keys for `keyrelay reconcile` (reconcile/admin-keys.ts): never stored or shown. */
  adminKeys: AdminKeys;
  // Never read from the environment: each owner's constant applies when absent. Tests set them to reach
  // what the constant takes minutes to show.
  /** Key cache lifetime (keys/verify.ts). */
  keyCacheTtlMs?: number;
  /** Alert evaluation and delivery (alerts/index.ts, ALERT_DEFAULTS). */
  alerts?: {
    intervalMs: number;
    retryDelaysMs: readonly number[];
    timeoutMs: number;
    /** How webhook host names are resolved (the system's resolver unless a test gives its own). */
    lookup?: (host: string) => Promise<string[]>;
    leaseMarginMs?: number;
  };
  /** Console sign-in and sign-up throttling (accounts/throttle.ts). */
  loginThrottle?: { windowMs: number; maxPerEmail: number; maxPerIp: number };
  /** Idle upstream connections kept for reuse (proxy/agent.ts). */
  upstreamKeepAliveMs?: number;
  /** SQLite: how long the log writer's thread outlives its last write (store/sqlite/log-writer.ts). */
  logWriterIdleMs?: number;
  /** Largest SSE event or batch-results line held whole (proxy/stream-back.ts). */
  sseEventBytes?: number;
  /** Console sessions' idle and absolute lifetimes (accounts/sessions.ts). */
  sessionIdleMs?: number;
  sessionMaxMs?: number;
  /** How the providers' cost and usage reports are fetched: retries, waits, bounds (reconcile/admin-fetch.ts). */
  costReportFetch?: {
    timeoutMs?: number;
    attempts?: number;
    backoffMs?: number;
    maxPages?: number;
    deadlineMs?: number;
  };
}

/** A provider's origin: every provider route resolution hands out has one (loadConfig sets them together). */
export function upstreamOrigin(config: Pick<Config, 'upstreams'>, provider: string): string {
  const origin = config.upstreams[provider];
  if (origin === undefined) throw new RangeError(`no origin for provider ${JSON.stringify(provider)}`);
  return origin;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** The address a server bound to host:port answers on (IPv6 hosts in brackets): the default public URL. */
export function localUrl(host: string, port: number): string {
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/**
 * KEYRELAY_UPSTREAMS: a JSON object when the value starts with `{`, else the path of a file holding one
 * (a deployment's secrets manager or config map mounts files more readily than long values).
 */
function readUpstreams(value: string | undefined): NamedUpstream[] {
  if (value === undefined) return [];
  let json = value;
  if (!value.trimStart().startsWith('{')) {
    try {
      json = readFileSync(value, 'utf8');
    } catch (err) {
      throw new ConfigError(
        `invalid configuration: KEYRELAY_UPSTREAMS: neither JSON nor a readable file (${(err as Error).message})`,
      );
    }
  }
  try {
    return parseUpstreams(json);
  } catch (err) {
    throw new ConfigError(`invalid configuration: KEYRELAY_UPSTREAMS: ${(err as Error).message}`);
  }
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
  let telemetry: TelemetrySettings | null;
  try {
    telemetry = readTelemetrySettings({ ...env, ...overrides });
  } catch (err) {
    throw new ConfigError(`invalid configuration: ${(err as Error).message}`);
  }
  const named = readUpstreams(e.KEYRELAY_UPSTREAMS);
  const publicUrl = (e.KEYRELAY_PUBLIC_URL ?? localUrl(e.KEYRELAY_HOST, e.KEYRELAY_PORT)).replace(/\/+$/, '');
  return Object.freeze({
    host: e.KEYRELAY_HOST,
    port: e.KEYRELAY_PORT,
    publicUrl,
    upstreams: Object.freeze({
      openai: e.KEYRELAY_OPENAI_UPSTREAM,
      anthropic: e.KEYRELAY_ANTHROPIC_UPSTREAM,
      ...Object.fromEntries(named.map((u) => [u.name, u.origin])),
    }),
    namedUpstreams: Object.freeze(named.map((u) => Object.freeze(u))),
    dataDir: e.KEYRELAY_DATA_DIR,
    databaseUrl: e.KEYRELAY_DATABASE_URL ?? null,
    redisUrl: e.KEYRELAY_REDIS_URL ?? null,
    signup: e.KEYRELAY_SIGNUP,
    bodyLogBytes: e.KEYRELAY_BODY_LOG_BYTES,
    maxBodyBytes: e.KEYRELAY_MAX_BODY_BYTES,
    headersTimeoutMs: e.KEYRELAY_HEADERS_TIMEOUT_MS,
    idleTimeoutMs: e.KEYRELAY_IDLE_TIMEOUT_MS,
    requestLog: e.KEYRELAY_REQUEST_LOG,
    retentionDays: e.KEYRELAY_RETENTION_DAYS,
    logSearch: Object.freeze({ enabled: e.KEYRELAY_LOG_SEARCH }),
    drainTimeoutMs: e.KEYRELAY_DRAIN_TIMEOUT_MS,
    trustProxy: e.KEYRELAY_TRUST_PROXY,
    logLevel: e.KEYRELAY_LOG_LEVEL,
    ws: Object.freeze({
      maxMessageBytes: e.KEYRELAY_WS_MAX_MESSAGE_BYTES,
      idleTimeoutMs: WS_IDLE_TIMEOUT_MS,
      highWaterBytes: WS_HIGH_WATER_BYTES,
      maxBufferBytes: WS_MAX_BUFFER_BYTES,
    }),
    logFormat: e.KEYRELAY_LOG_FORMAT,
    secureCookies: publicUrl.startsWith('https:'),
    guard: Object.freeze({
      clientHeadersTimeoutMs: CLIENT_HEADERS_TIMEOUT_MS,
      clientRequestTimeoutMs: Math.max(e.KEYRELAY_CLIENT_REQUEST_TIMEOUT_MS, CLIENT_HEADERS_TIMEOUT_MS),
      clientBodyIdleTimeoutMs: CLIENT_BODY_IDLE_TIMEOUT_MS,
      maxConnections: e.KEYRELAY_MAX_CONNECTIONS ?? null,
      maxConnectionsPerIp: e.KEYRELAY_MAX_CONNECTIONS_PER_IP,
      maxHeaders: MAX_HEADERS,
      trustProxy: e.KEYRELAY_TRUST_PROXY,
    }),
    limits: Object.freeze({}),
    telemetry: telemetry && Object.freeze(telemetry),
    adminKeys: adminKeysFrom({ ...env, ...overrides }),
  });
}
