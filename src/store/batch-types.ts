/**
 * Batches: each batch keyrelay has seen, against the key it was created (or first seen) with,
 * and the one-time record of its results' cost. Each account has its own ledger: a batch id is the
 * provider's, and keys of two accounts may reach the same provider organization. Part of the LogStore: it
 * lives beside the request rows whose spend it feeds.
 */
import type { Provider } from '../types.js';

/** What a batch object passing through keyrelay said (create, retrieve, list, cancel). */
export interface BatchSeen {
  provider: Provider;
  batch_id: string;
  key_id: string;
  account_id: string;
  at: string;
  /** The batch was created by a call through keyrelay (else first seen on a retrieval or a download). */
  created_here: boolean;
  status: string | null;
  request_counts: Record<string, number>;
  /** OpenAI: the file its results are downloaded from. */
  output_file_id: string | null;
}

/** The results of a batch as one download priced them: recorded once per batch, by the first download. */
export interface BatchResultsClaim {
  provider: Provider;
  batch_id: string;
  key_id: string;
  account_id: string;
  at: string;
  request_id: string;
  cost_usd: number;
  /** Succeeded lines priced; succeeded lines without a price; lines that could not be read. */
  succeeded: number;
  unpriced: number;
  broken: number;
}

export interface BatchRecord {
  provider: Provider;
  batch_id: string;
  key_id: string;
  account_id: string;
  created_at: string;
  updated_at: string;
  created_here: boolean;
  status: string | null;
  request_counts: Record<string, number>;
  output_file_id: string | null;
  /** null until results passed through keyrelay: shown as "results not yet fetched", never as $0. */
  results_cost_usd: number | null;
  results_succeeded: number | null;
  results_unpriced: number | null;
  results_broken: number | null;
  results_request_id: string | null;
  results_fetched_at: string | null;
}

export interface BatchStore {
  /** Records what a batch object said in the account's ledger; the account's first key to show it keeps it. */
  upsertBatch: (b: BatchSeen) => Promise<void>;
  /** The account's batch whose output file this is (OpenAI), or null. */
  batchByOutputFile: (accountId: string, provider: Provider, fileId: string) => Promise<BatchRecord | null>;
  /**
   * Records a batch's results cost in the account's ledger if none was recorded there yet (creating the
   * batch if the account never showed it); true when this call recorded it. Atomic: of concurrent downloads,
   * on any number of instances, one wins.
   */
  claimBatchResults: (c: BatchResultsClaim) => Promise<boolean>;
  /** An account's batches, most recently created first. */
  listBatches: (accountId: string, limit: number) => Promise<BatchRecord[]>;
}
