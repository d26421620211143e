/**
 * The store of the log writer's worker (log-store-worker.ts): a batch arrives in parts, so that handing it
 * over never holds the event loop long (log-writer.ts), and is written in one transaction, as a commit costs
 * the same whatever it holds.
 */
import type { InsertResult } from '../types.js';
import { SqliteLogStore, type EncodedRow } from './log-store.js';

export class SqliteWriterStore extends SqliteLogStore {
  private staged: { batch: number; rows: EncodedRow[] } | null = null;

  /** Holds a part of `batch` until the call that writes it. */
  stageEncoded(batch: number, rows: readonly EncodedRow[]): void {
    if (this.staged?.batch !== batch) this.staged = { batch, rows: [] };
    this.staged.rows.push(...rows);
  }

  /** Writes the `stagedRows` rows staged for `batch`, then `last`, in one transaction (insertEncoded). */
  insertStaged(
    batch: number,
    stagedRows: number,
    last: readonly EncodedRow[],
    refusedBefore: number,
  ): InsertResult {
    const staged = this.staged?.batch === batch ? this.staged.rows : [];
    this.staged = null;
    // A worker that exited between the parts took the first ones with it: the caller sends the batch again.
    if (staged.length !== stagedRows)
      throw new Error(`batch ${batch}: ${staged.length} of its ${stagedRows} staged rows arrived`);
    return this.insertEncoded(staged.concat(last), refusedBefore);
  }
}
