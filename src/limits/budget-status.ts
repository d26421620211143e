/** How much of a key's budget its period has spent, and when the period ends: what the console and CLI show. */
import type { KeyBudgetStatus, KeyRecord, LogStore } from '../store/types.js';
import { periodBounds } from './periods.js';

/**
 * The status of the key's budget now, or null for a key without one. Spend is what the log store has
 * committed (LogStore.spendSince, as a budget's first read takes it), so a request still being written may
 * be a second late.
 */
export async function readBudgetStatus(
  logStore: Pick<LogStore, 'spendSince'>,
  key: KeyRecord,
  now: Date,
): Promise<KeyBudgetStatus | null> {
  if (key.budget_usd === null) return null;
  const { start, end } = periodBounds(key.budget_period ?? 'month', now.getTime());
  const spent = await logStore.spendSince(key.id, new Date(start).toISOString());
  return {
    spent_usd: spent,
    budget_usd: key.budget_usd,
    period_start: new Date(start).toISOString(),
    resets_at: new Date(end).toISOString(),
  };
}
