/** `keyrelay serve`: runs until SIGTERM/SIGINT, then stops gracefully (drain, flush, close) and exits 0. */
import type { Config } from '../config.js';
import { startIdleReclaim } from '../memory.js';
import { startServer } from '../server.js';

export async function serve(config: Readonly<Config>): Promise<number> {
  const server = await startServer(config);
  server.app.log.info({ url: server.url, console: config.publicUrl }, 'keyrelay listening');
  const reclaim = startIdleReclaim({
    onCollect: (reason, ms) => server.app.log.debug({ reason, ms }, 'idle memory reclaim'),
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
  return -1;
}
