/* eslint-disable @typescript-eslint/require-await -- SQLite drivers are synchronous; `async` turns their throws
   into rejections, as the interface promises. */
/** BatchStore on SQLite: the `batches` table beside the request log (log-schema.ts, migrations 5 and 9): one ledger per account. */
import type { Provider } from '../../types.js';
import type { BatchRecord, BatchResultsClaim, BatchSeen, BatchStore } from '../batch-types.js';
import { toIso } from '../time.js';
import type { StatementCache } from './db.js';

type DbRow = Record<string, unknown>;

function decode(r: DbRow): BatchRecord {
  return {
    provider: r.provider as Provider,
    batch_id: r.batch_id as string,
    key_id: r.key_id as string,
    account_id: r.account_id as string,
    created_at: r.created_at as string,
    updated_at: r.updated_at as string,
    created_here: r.created_here === 1,
    status: (r.status as string | null) ?? null,
    request_counts: JSON.parse(r.request_counts as string) as Record<string, number>,
    output_file_id: (r.output_file_id as string | null) ?? null,
    results_cost_usd: (r.results_cost_usd as number | null) ?? null,
    results_succeeded: (r.results_succeeded as number | null) ?? null,
    results_unpriced: (r.results_unpriced as number | null) ?? null,
    results_broken: (r.results_broken as number | null) ?? null,
    results_request_id: (r.results_request_id as string | null) ?? null,
    results_fetched_at: (r.results_fetched_at as string | null) ?? null,
  };
}

const INSERT = `INSERT INTO batches (provider, batch_id, key_id, account_id, created_at, updated_at, created_here,
    status, request_counts, output_file_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;

export function sqliteBatchStore(stmt: StatementCache): BatchStore {
  return {
    async upsertBatch(b: BatchSeen) {
      const at = toIso(b.at);
      stmt(
        `${INSERT} ON CONFLICT (account_id, provider, batch_id) DO UPDATE SET
           updated_at = excluded.updated_at,
           created_here = MAX(created_here, excluded.created_here),
           status = COALESCE(excluded.status, status),
           request_counts = CASE WHEN excluded.request_counts = '{}' THEN request_counts ELSE excluded.request_counts END,
           output_file_id = COALESCE(excluded.output_file_id, output_file_id)`,
      ).run(
        b.provider,
        b.batch_id,
        b.key_id,
        b.account_id,
        at,
        at,
        b.created_here ? 1 : 0,
        b.status,
        JSON.stringify(b.request_counts),
        b.output_file_id,
      );
    },
    async batchByOutputFile(accountId, provider, fileId) {
      const r = stmt<[string, string, string], DbRow>(
        'SELECT * FROM batches WHERE account_id = ? AND provider = ? AND output_file_id = ? LIMIT 1',
      ).get(accountId, provider, fileId);
      return r ? decode(r) : null;
    },
    async claimBatchResults(c: BatchResultsClaim) {
      const at = toIso(c.at);
      stmt(`${INSERT} ON CONFLICT (account_id, provider, batch_id) DO NOTHING`).run(
        c.provider,
        c.batch_id,
        c.key_id,
        c.account_id,
        at,
        at,
        0,
        null,
        '{}',
        null,
      );
      // One statement: of two downloads, whichever updates first sets results_fetched_at; the other matches nothing.
      const done = stmt(
        `UPDATE batches SET results_cost_usd = ?, results_succeeded = ?, results_unpriced = ?, results_broken = ?,
           results_request_id = ?, results_fetched_at = ?
         WHERE account_id = ? AND provider = ? AND batch_id = ? AND results_fetched_at IS NULL`,
      ).run(
        c.cost_usd,
        c.succeeded,
        c.unpriced,
        c.broken,
        c.request_id,
        at,
        c.account_id,
        c.provider,
        c.batch_id,
      );
      return Number(done.changes) === 1;
    },
    async listBatches(accountId, limit) {
      return stmt<[string, number], DbRow>(
        'SELECT * FROM batches WHERE account_id = ? ORDER BY created_at DESC, batch_id DESC LIMIT ?',
      )
        .all(accountId, limit)
        .map(decode);
    },
  };
}
