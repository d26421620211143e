/** `keyrelay serve`: runs until SIGTERM/SIGINT, then stops gracefully (drain, flush, close) and exits 0. */
import { resolve } from 'node:path';
import type { Config } from '../config.js';
import { isPretty } from '../logger.js';
import { startIdleReclaim } from './memory.js';
import { applyV8Policy } from './v8-policy.js';
import { startServer, type RunningServer } from '../server.js';

export async function serve(config: Readonly<Config>): Promise<number> {
  applyV8Policy({ pretenuring: config.v8Pretenuring });
  const server = await startServer(config);
  const reclaim = startIdleReclaim({
    traffic: server.traffic,
    onCollect: (reason, ms, trimmed) => server.app.log.debug({ reason, ms, trimmed }, 'idle memory reclaim'),
  });
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    signals++;
    if (signals > 1) {
      server.app.log.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    server.app.log.info({ signal }, 'draining');
    reclaim.stop();
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
