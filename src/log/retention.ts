/**
 * Background pruning of the request log: rows older than KEYRELAY_RETENTION_DAYS, and the stored bodies of
 * an account's rows sooner where its settings say so (the console's Settings page); and of the audit log:
 * the entries older than their organization's audit retention (docs/teams.md).
 */
import type { ConfigStore, LogStore } from '../store/types.js';

const DAY_MS = 86_400_000;
const INTERVAL_MS = 3_600_000;

export function startRetention(
  logStore: Pick<LogStore, 'prune'>,
  configStore: Pick<ConfigStore, 'bodyRetentions' | 'pruneAudit'>,
  config: { retentionDays: number },
  onError: (err: unknown) => void,
): { stop(): void; runOnce(): Promise<void> } {
  const runOnce = async () => {
    await configStore.pruneAudit();
    const now = Date.now();
    const bodies = (await configStore.bodyRetentions())
      .filter((r) => config.retentionDays === 0 || r.days < config.retentionDays)
      .map((r) => ({ account_id: r.account_id, before: new Date(now - r.days * DAY_MS).toISOString() }));
    if (config.retentionDays === 0 && bodies.length === 0) return; // 0 = keep forever
    const before = config.retentionDays
      ? new Date(now - config.retentionDays * DAY_MS).toISOString()
      : new Date(0).toISOString();
    await logStore.prune(before, bodies);
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
