/**
 * What the proxy is given, in three parts: the services every request uses (the same for the HTTP and
 * the WebSocket proxy), the shutdown state the server shares with it, and (in exchange.ts) what building a
 * log row needs. Settings are read from `config`, never copied beside it.
 */
import type { Logger } from 'pino';
import type { Dispatcher } from 'undici';
import type { Config } from '../config.js';
import type { LastUsedTracker } from '../keys/last-used.js';
import type { KeyVerifier } from '../keys/verify.js';
import type { Limits } from '../limits/limiter.js';
import type { BatchStore } from '../store/batch-types.js';
import type { RequestLogRow } from '../types.js';
import type { Metrics } from '../metrics.js';
import type { Telemetry } from '../telemetry/index.js';
import type { RowSettings } from './exchange.js';

export interface ProxyServices extends RowSettings {
  config: Readonly<Config>;
  keys: KeyVerifier;
  lastUsed: LastUsedTracker;
  /** Hands a finished request's row to the log (the write-behind queue); never awaited. */
  record: (row: RequestLogRow) => void;
  limits: Limits;
  metrics: Metrics;
  /** OpenTelemetry spans and metrics of each ended call; null: export is off. */
  telemetry: Telemetry | null;
  log: Pick<Logger, 'info' | 'warn' | 'error'>;
  /** The shared upstream connection pool (proxy/agent.ts). */
  dispatcher: Dispatcher;
  /** Batches seen and their results' one-time cost (proxy/batches.ts); null: not tracked. */
  batches: BatchStore | null;
}

/** The server's shutdown, as the proxy sees it (src/server.ts drives it). */
export interface Shutdown {
  isDraining: () => boolean;
  /** Aborts for in-flight upstream requests, so shutdown can cut what outlives the drain deadline. */
  inflight: Set<() => void>;
  /** Every exchange until its log row is queued: shutdown waits for these before the final flush. */
  active: Set<Promise<void>>;
}
