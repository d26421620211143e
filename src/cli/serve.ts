/** `keyrelay serve`: runs until SIGTERM/SIGINT, then stops gracefully (drain, flush, close) and exits 0. */
import { resolve } from 'node:path';
import { mallocVariables, unknownVariables, type Config } from '../config.js';
import { isPretty } from '../logger.js';
import { exposedGc, mallocKeepsFreedMemory, startIdleReclaim } from './memory.js';
import { startServer, type RunningServer } from '../server.js';

/**
 * Variables earlier releases read, now internal constants: named at start so a deployment learns its
 * setting no longer applies. Remove a release after it shipped.
 */
const REMOVED_VARIABLES = new Set([
  'KEYRELAY_CONNECT_TIMEOUT_MS',
  'KEYRELAY_UPSTREAM_KEEPALIVE_MS',
  'KEYRELAY_KEY_CACHE_TTL_MS',
  'KEYRELAY_LOG_BATCH_SIZE',
  'KEYRELAY_LOG_BATCH_BODY_CHARS',
  'KEYRELAY_LOG_FLUSH_MS',
  'KEYRELAY_LOG_WRITER_IDLE_MS',
  'KEYRELAY_LOG_READER_IDLE_MS',
  'KEYRELAY_SQLITE_CACHE_MB',
  'KEYRELAY_V8_PRETENURING',
  'KEYRELAY_LOG_QUEUE_MAX',
  'KEYRELAY_LOG_QUEUE_MAX_BODY_CHARS',
  'KEYRELAY_LOG_SEARCH_BODY_CHARS',
  'KEYRELAY_LOG_SEARCH_SCAN_ROWS',
  'KEYRELAY_SESSION_IDLE_HOURS',
  'KEYRELAY_SESSION_MAX_DAYS',
  'KEYRELAY_LOGIN_WINDOW_MINUTES',
  'KEYRELAY_LOGIN_MAX_PER_EMAIL',
  'KEYRELAY_LOGIN_MAX_PER_IP',
  'KEYRELAY_WS_IDLE_TIMEOUT_MS',
  'KEYRELAY_WS_HIGH_WATER_BYTES',
  'KEYRELAY_WS_MAX_BUFFER_BYTES',
  'KEYRELAY_CLIENT_HEADERS_TIMEOUT_MS',
  'KEYRELAY_CLIENT_BODY_IDLE_TIMEOUT_MS',
  'KEYRELAY_MAX_HEADERS',
  'KEYRELAY_USAGE_DECODE_BYTES',
  'KEYRELAY_SSE_EVENT_BYTES',
  'KEYRELAY_BUDGET_DEFAULT_OUTPUT_TOKENS',
  'KEYRELAY_LIMIT_HOLD_TTL_MS',
]);

/** Variables whose setting moved elsewhere (the console, the API and CLI, a named upstream): named with where. */
const MOVED_VARIABLES: Readonly<Record<string, string>> = {
  KEYRELAY_HARD_BUDGET_UNPRICED:
    "each key's hard budget has its own setting: the console's limits dialog, budget_unpriced in the console API, `keyrelay keys limits --budget-unpriced refuse|allow`",
  KEYRELAY_OPENAI_STREAM_USAGE:
    'an OpenAI-compatible server that refuses stream_options is a named upstream with "streamUsage": false in KEYRELAY_UPSTREAMS (README, Named upstreams)',
  KEYRELAY_BODY_RETENTION_DAYS:
    'each account sets how long its request bodies are kept: the console\'s Settings page ("Keep request bodies for"), PUT /api/console/settings',
};

export async function serve(config: Readonly<Config>): Promise<number> {
  const keepsFreedMemory = mallocKeepsFreedMemory(mallocVariables());
  const server = await startServer(config);
  const unknown = unknownVariables();
  const removed = unknown.filter((name) => REMOVED_VARIABLES.has(name));
  const moved = unknown.filter((name) => name in MOVED_VARIABLES);
  for (const name of moved)
    server.app.log.warn({ variable: name }, `${name} is no longer read: ${MOVED_VARIABLES[name]}`);
  if (removed.length > 0)
    server.app.log.warn(
      { variables: removed },
      'these variables are no longer read: their values are internal constants now (README, Configuration)',
    );
  const misspelt = unknown.filter((name) => !REMOVED_VARIABLES.has(name) && !(name in MOVED_VARIABLES));
  if (misspelt.length > 0)
    server.app.log.warn({ variables: misspelt }, 'unknown keyrelay variables, ignored');
  const gc = exposedGc();
  const reclaim = gc
    ? startIdleReclaim(gc, {
        traffic: server.traffic,
        onCollect: (reason, ms) => server.app.log.debug({ reason, ms }, 'idle memory reclaim'),
      })
    : null;
  if (!gc)
    server.app.log.info('idle memory reclaim off: node was started without --expose-gc (npm start has it)');
  if (keepsFreedMemory)
    server.app.log.info(
      'glibc keeps freed memory: MALLOC_TRIM_THRESHOLD_ is unset (npm start sets it; README, Node flags)',
    );
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    signals++;
    if (signals > 1) {
      server.app.log.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    server.app.log.info({ signal }, 'draining');
    reclaim?.stop();
    server.stop().then(
      () => {
        server.app.log.info('stopped');
        process.exit(0);
      },
      (err: unknown) => {
        server.app.log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  // Only now: whoever waits for this line may signal at once, and the handlers must be there to drain.
  if (isPretty(config.logFormat)) process.stdout.write(banner(config, server));
  else server.app.log.info({ url: server.url, console: server.publicUrl }, 'keyrelay listening');
  return -1;
}

/** A database or Redis URL without its credentials, for the banner. */
function withoutCredentials(url: string): string {
  try {
    const u = new URL(url);
    u.username = '';
    u.password = '';
    return u.toString();
  } catch {
    return '(set)';
  }
}

/** What a person starting keyrelay on a terminal wants to know: where it is, where its data is. */
export function banner(config: Readonly<Config>, server: Pick<RunningServer, 'url' | 'publicUrl'>): string {
  const pub = server.publicUrl;
  const rows = [
    ['console', `${pub}/`],
    ['OpenAI', `${pub}/api/proxy/openai/v1`],
    ['Anthropic', `${pub}/api/proxy/anthropic`],
    [
      'data',
      config.databaseUrl
        ? `PostgreSQL ${withoutCredentials(config.databaseUrl)}`
        : `SQLite in ${resolve(config.dataDir)}`,
    ],
    [
      'redis',
      config.redisUrl
        ? withoutCredentials(config.redisUrl)
        : 'not used (limits and revocations are per instance)',
    ],
    ['logs', `${config.logLevel}; JSON lines with --log-format json (KEYRELAY_LOG_FORMAT=json)`],
  ];
  return [
    '',
    `  keyrelay is listening on ${server.url}`,
    '',
    ...rows.map(([k, v]) => `  ${k!.padEnd(10)} ${v}`),
    '',
    '  Ctrl-C stops it gracefully.',
    '',
    '',
  ].join('\n');
}
