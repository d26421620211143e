/** BatchStore on PostgreSQL: the `batches` table beside the request log (log-schema.ts, migrations 5 and 9): one ledger per account. */
import type pg from 'pg';
import type { Provider } from '../../types.js';
import type { BatchRecord, BatchResultsClaim, BatchSeen, BatchStore } from '../batch-types.js';
import { toIso } from '../time.js';
import { isoOrNull } from './db.js';

type Row = Record<string, unknown>;

const n = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));

function decode(r: Row): BatchRecord {
  return {
    provider: r.provider as Provider,
    batch_id: r.batch_id as string,
    key_id: r.key_id as string,
    account_id: r.account_id as string,
    created_at: isoOrNull(r.created_at)!,
    updated_at: isoOrNull(r.updated_at)!,
    created_here: r.created_here === true,
    status: (r.status as string | null) ?? null,
    request_counts: r.request_counts as Record<string, number>,
    output_file_id: (r.output_file_id as string | null) ?? null,
    results_cost_usd: n(r.results_cost_usd),
    results_succeeded: n(r.results_succeeded),
    results_unpriced: n(r.results_unpriced),
    results_broken: n(r.results_broken),
    results_request_id: (r.results_request_id as string | null) ?? null,
    results_fetched_at: isoOrNull(r.results_fetched_at),
  };
}

const INSERT = `INSERT INTO batches (provider, batch_id, key_id, account_id, created_at, updated_at, created_here,
    status, request_counts, output_file_id) VALUES ($1, $2, $3, $4, $5, $5, $6, $7, $8::jsonb, $9)`;

export function pgBatchStore(pool: pg.Pool): BatchStore {
  return {
    async upsertBatch(b: BatchSeen) {
      await pool.query(
        `${INSERT} ON CONFLICT (account_id, provider, batch_id) DO UPDATE SET
           updated_at = excluded.updated_at,
           created_here = batches.created_here OR excluded.created_here,
           status = COALESCE(excluded.status, batches.status),
           request_counts = CASE WHEN excluded.request_counts = '{}'::jsonb THEN batches.request_counts
             ELSE excluded.request_counts END,
           output_file_id = COALESCE(excluded.output_file_id, batches.output_file_id)`,
        [
          b.provider,
          b.batch_id,
          b.key_id,
          b.account_id,
          toIso(b.at),
          b.created_here,
          b.status,
          JSON.stringify(b.request_counts),
          b.output_file_id,
        ],
      );
    },
    async batchByOutputFile(accountId, provider, fileId) {
      const { rows } = await pool.query<Row>(
        'SELECT * FROM batches WHERE account_id = $1 AND provider = $2 AND output_file_id = $3 LIMIT 1',
        [accountId, provider, fileId],
      );
      return rows[0] ? decode(rows[0]) : null;
    },
    async claimBatchResults(c: BatchResultsClaim) {
      await pool.query(`${INSERT} ON CONFLICT (account_id, provider, batch_id) DO NOTHING`, [
        c.provider,
        c.batch_id,
        c.key_id,
        c.account_id,
        toIso(c.at),
        false,
        null,
        '{}',
        null,
      ]);
      // One statement: under concurrent downloads (any instance) the row lock lets one update match.
      const done = await pool.query(
        `UPDATE batches SET results_cost_usd = $1, results_succeeded = $2, results_unpriced = $3, results_broken = $4,
           results_request_id = $5, results_fetched_at = $6
         WHERE account_id = $7 AND provider = $8 AND batch_id = $9 AND results_fetched_at IS NULL`,
        [
          c.cost_usd,
          c.succeeded,
          c.unpriced,
          c.broken,
          c.request_id,
          toIso(c.at),
          c.account_id,
          c.provider,
          c.batch_id,
        ],
      );
      return done.rowCount === 1;
    },
    async listBatches(accountId, limit) {
      const { rows } = await pool.query<Row>(
        'SELECT * FROM batches WHERE account_id = $1 ORDER BY created_at DESC, batch_id DESC LIMIT $2',
        [accountId, limit],
      );
      return rows.map(decode);
    },
  };
}
