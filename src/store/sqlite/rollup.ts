/**
 * The hourly usage rollup on SQLite (../rollup.ts): its table, its backfill, and the upserts the log
 * writer runs for the rows a batch newly inserted, inside the batch's transaction.
 */
import { LOG_COLUMNS } from '../log-query.js';
import {
  ROLLUP_DIMS,
  ROLLUP_SUMS,
  addHistogramText,
  histogramText,
  rollupDeltas,
  type Histogram,
  type RollupDelta,
  type RollupInput,
} from '../rollup.js';
import type { Db } from './db.js';

type Prepare = Db['prepare'];

const KEY = ['org_id', 'hour', ...ROLLUP_DIMS.slice(1)] as const;

export const ROLLUP_TABLE_SQL = `
  CREATE TABLE usage_hourly (
    org_id TEXT NOT NULL,
    hour TEXT NOT NULL,
    account_id TEXT NOT NULL,
    key_id TEXT NOT NULL,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    credential_fingerprint TEXT NOT NULL,
    requests INTEGER NOT NULL,
    errors INTEGER NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cache_read_tokens INTEGER NOT NULL,
    cost_usd REAL NOT NULL,
    unknown_cost_requests INTEGER NOT NULL,
    partial_cost_requests INTEGER NOT NULL,
    latency TEXT NOT NULL,
    PRIMARY KEY (${KEY.join(', ')})
  ) STRICT, WITHOUT ROWID;
  CREATE INDEX usage_hourly_account ON usage_hourly(account_id, hour);
  CREATE INDEX usage_hourly_key ON usage_hourly(key_id, hour);
`;

const KEY_WHERE = KEY.map((c) => `${c} = ?`).join(' AND ');
/**
 * A row's histogram text grows by each batch's pairs (appended: no read before the write) until it is longer
 * than this, then is merged in place. Merged, a histogram is a few dozen pairs in practice (~8 characters
 * each), at most ~700 (latencies from 1 ms to 10 minutes): a read merges at most a few KB a rollup row.
 */
const COMPACT_AT = 4096;
const UPSERT_SQL = `INSERT INTO usage_hourly (${[...KEY, ...ROLLUP_SUMS, 'latency'].join(', ')})
  VALUES (${[...KEY, ...ROLLUP_SUMS, 'latency'].map(() => '?').join(', ')})
  ON CONFLICT (${KEY.join(', ')}) DO UPDATE SET
  ${ROLLUP_SUMS.map((c) => `${c} = ${c} + excluded.${c}`).join(', ')},
  latency = latency || ',' || excluded.latency
  RETURNING length(latency) AS n`;
const SELECT_LATENCY_SQL = `SELECT latency FROM usage_hourly WHERE ${KEY_WHERE}`;
const SET_LATENCY_SQL = `UPDATE usage_hourly SET latency = ? WHERE ${KEY_WHERE}`;

/**
 * Adds increments to the rollup, one upsert per rollup row; inside the caller's transaction (which holds
 * the write lock), so a compaction's read and write see no other writer between them.
 */
export function writeRollup(prepare: Prepare, deltas: readonly RollupDelta[]): void {
  if (deltas.length === 0) return;
  const upsert = prepare<(string | number)[], { n: number }>(UPSERT_SQL);
  for (const d of deltas) {
    const key = [d.dims[0]!, d.hour, ...d.dims.slice(1)];
    const { n } = upsert.get(...key, ...ROLLUP_SUMS.map((c) => d.sums[c]), histogramText(d.hist))!;
    if (n > COMPACT_AT) {
      const merged: Histogram = new Map();
      addHistogramText(
        merged,
        prepare<string[], { latency: string }>(SELECT_LATENCY_SQL).get(...key)!.latency,
      );
      prepare<string[]>(SET_LATENCY_SQL).run(histogramText(merged), ...key);
    }
  }
}

const col = (name: (typeof LOG_COLUMNS)[number]) => LOG_COLUMNS.indexOf(name);
const AT = {
  org_id: col('org_id'),
  account_id: col('account_id'),
  key_id: col('key_id'),
  provider: col('provider'),
  model: col('model'),
  credential_fingerprint: col('credential_fingerprint'),
  created_at: col('created_at'),
  status: col('status'),
  outcome: col('outcome'),
  input_tokens: col('input_tokens'),
  output_tokens: col('output_tokens'),
  cache_read_tokens: col('cache_read_tokens'),
  cost_usd: col('cost_usd'),
  price_source: col('price_source'),
  latency_ms: col('latency_ms'),
};

/** An encoded row's (values in LOG_COLUMNS order) share of the rollup. */
export function rollupInputOf(row: readonly (string | number | null)[]): RollupInput {
  const out: Record<string, unknown> = {};
  for (const [name, i] of Object.entries(AT)) out[name] = row[i];
  return out as unknown as RollupInput;
}

/** Rows the backfill reads at once: its memory stays bounded on a log of any size. */
const BACKFILL_PAGE = 20_000;

/** Log migration 19: the table, filled from the rows already in the log (a million rows: a few seconds). */
export function createRollup(db: Db): void {
  db.exec(ROLLUP_TABLE_SQL);
  const page = db.prepare<[number, number], RollupInput & { rowid: number }>(
    `SELECT rowid, ${Object.keys(AT).join(', ')} FROM requests WHERE rowid > ? ORDER BY rowid LIMIT ?`,
  );
  const prepare: Prepare = (sql) => db.prepare(sql);
  let after = 0;
  for (;;) {
    const rows = page.all(after, BACKFILL_PAGE);
    if (rows.length === 0) break;
    writeRollup(prepare, rollupDeltas(rows));
    after = rows[rows.length - 1]!.rowid;
  }
}
