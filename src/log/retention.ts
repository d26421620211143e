/** Background pruning of old request-log rows and bodies (KEYRELAY_RETENTION_DAYS / _BODY_RETENTION_DAYS). */
import type { Config } from '../config.js';
import type { LogStore } from '../store/types.js';

const DAY_MS = 86_400_000;
const INTERVAL_MS = 3_600_000;

export function startRetention(
  store: Pick<LogStore, 'prune'>,
  config: Pick<Config, 'retentionDays' | 'bodyRetentionDays'>,
  onError: (err: unknown) => void,
): { stop(): void; runOnce(): Promise<void> } {
  const runOnce = async () => {
    if (config.retentionDays === 0 && config.bodyRetentionDays === 0) return; // 0 = keep forever
    const now = Date.now();
    const before = config.retentionDays
      ? new Date(now - config.retentionDays * DAY_MS).toISOString()
      : new Date(0).toISOString();
    const bodiesBefore = config.bodyRetentionDays
      ? new Date(now - config.bodyRetentionDays * DAY_MS).toISOString()
      : undefined;
    await store.prune(before, bodiesBefore);
  };
  const tick = () => runOnce().catch(onError);
  const first = setTimeout(tick, 60_000);
  const timer = setInterval(tick, INTERVAL_MS);
  first.unref();
  timer.unref();
  return {
    stop() {
      clearTimeout(first);
      clearInterval(timer);
    },
    runOnce,
  };
}
