/** Prometheus metrics (prom-client). One registry per app so tests can run several apps in one process. */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { RequestLogRow } from './types.js';
import { missingFees } from './usage/index.js';

export type Metrics = ReturnType<typeof createMetrics>;

/**
 * Per-request counts kept in plain maps and added to their prom-client counters when /metrics is read:
 * prom-client hashes and validates the label set on every inc(), up to seven times a request otherwise.
 */
class Tally {
  private pending = new Map<string, { labels: Record<string, string>; n: number }>();

  add(key: string, labels: () => Record<string, string>, n: number): void {
    const entry = this.pending.get(key);
    if (entry) entry.n += n;
    else this.pending.set(key, { labels: labels(), n });
  }

  /** Moves what was counted since the last scrape into `counter`. */
  drainInto(counter: { inc(labels: Record<string, string>, n: number): void }): void {
    for (const entry of this.pending.values()) {
      if (entry.n === 0) continue;
      counter.inc(entry.labels, entry.n);
      entry.n = 0;
    }
  }
}

export function createMetrics() {
  const registry = new Registry();
  const requestTally = new Tally();
  const tokenTally = new Tally();
  const costTally = new Tally();
  const toolTally = new Tally();
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: 10 });
  const latencyBuckets = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
  return {
    registry,
    requestTally,
    tokenTally,
    costTally,
    toolTally,
    /** The (provider, fee, priced) label sets counted so far, at most TOOL_LABEL_SETS. */
    toolLabels: new Set<string>(),
    requests: new Counter({
      name: 'keyrelay_requests_total',
      help: 'Proxied requests by provider, status and outcome.',
      labelNames: ['provider', 'status', 'outcome'] as const,
      registers: [registry],
      collect() {
        requestTally.drainInto(this);
      },
    }),
    latency: new Histogram({
      name: 'keyrelay_request_duration_seconds',
      help: 'Arrival to last byte sent, per provider.',
      labelNames: ['provider'] as const,
      buckets: latencyBuckets,
      registers: [registry],
    }),
    ttfb: new Histogram({
      name: 'keyrelay_time_to_first_byte_seconds',
      help: 'Arrival to the first upstream body byte, per provider.',
      labelNames: ['provider'] as const,
      buckets: latencyBuckets,
      registers: [registry],
    }),
    tokens: new Counter({
      name: 'keyrelay_tokens_total',
      help: 'Tokens by provider and type (input, output, cache_read, cache_write, reasoning).',
      labelNames: ['provider', 'type'] as const,
      registers: [registry],
      collect() {
        tokenTally.drainInto(this);
      },
    }),
    cost: new Counter({
      name: 'keyrelay_cost_usd_total',
      help: 'Known cost in USD by provider.',
      labelNames: ['provider'] as const,
      registers: [registry],
      collect() {
        costTally.drainInto(this);
      },
    }),
    toolUses: new Counter({
      name: 'keyrelay_tool_uses_total',
      help: 'Server-side tool uses billed apart from tokens, by provider and fee; priced="no" where the price library has no rate (the row\'s cost is partial).',
      labelNames: ['provider', 'fee', 'priced'] as const,
      registers: [registry],
      collect() {
        toolTally.drainInto(this);
      },
    }),
    upstreamErrors: new Counter({
      name: 'keyrelay_upstream_errors_total',
      help: 'Upstream failures (unreachable, timeout, dropped mid-stream) and upstream 5xx, by provider.',
      labelNames: ['provider', 'kind'] as const,
      registers: [registry],
    }),
    logQueueDepth: new Gauge({
      name: 'keyrelay_log_queue_depth',
      help: 'Request-log rows waiting to be written.',
      registers: [registry],
    }),
    logRowsWritten: new Counter({
      name: 'keyrelay_log_rows_written_total',
      help: 'Request-log rows committed.',
      registers: [registry],
    }),
    logRowsDropped: new Counter({
      name: 'keyrelay_log_rows_dropped_total',
      help: 'Request-log rows dropped (queue full or rejected by the store).',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    logBodiesDropped: new Counter({
      name: 'keyrelay_log_bodies_dropped_total',
      help: 'Request-log rows queued without their bodies: the queue held its most body text (256 Mi characters) already.',
      registers: [registry],
    }),
    logWriteErrors: new Counter({
      name: 'keyrelay_log_write_errors_total',
      help: 'Failed batch writes (the batch stays queued and is retried).',
      registers: [registry],
    }),
    storeUp: new Gauge({
      name: 'keyrelay_store_up',
      help: '1 when the last write to the named store succeeded, 0 while it is failing.',
      labelNames: ['store'] as const,
      registers: [registry],
    }),
    otelSpansDropped: new Counter({
      name: 'keyrelay_otel_spans_dropped_total',
      help: 'OpenTelemetry spans not exported: queue full (collector slow or down), export failed, or not made (failed).',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    otelMetricExportsFailed: new Counter({
      name: 'keyrelay_otel_metric_exports_failed_total',
      help: 'OpenTelemetry metric exports that failed (the next export carries the cumulative sums).',
      registers: [registry],
    }),
    reconcileDifference: new Gauge({
      name: 'keyrelay_reconcile_difference_usd',
      help: "The last reconciled day's provider bill minus keyrelay's logged cost, by provider (reconcile).",
      labelNames: ['provider'] as const,
      registers: [registry],
    }),
    reconcileTokenDifference: new Gauge({
      name: 'keyrelay_reconcile_token_difference',
      help: "The last reconciled day's provider-counted tokens minus keyrelay's, by provider and kind (reconcile).",
      labelNames: ['provider', 'kind'] as const,
      registers: [registry],
    }),
    reconcileErrors: new Counter({
      name: 'keyrelay_reconcile_errors_total',
      help: 'Reconciliations whose provider cost or usage report could not be read (error, timeout, endless paging).',
      labelNames: ['provider'] as const,
      registers: [registry],
    }),
    redisUp: new Gauge({
      name: 'keyrelay_redis_up',
      help: '1 while the Redis connection used for revocation fan-out is ready (absent without Redis).',
      registers: [registry],
    }),
  };
}

const TOKEN_FIELDS = [
  ['input', 'input_tokens'],
  ['output', 'output_tokens'],
  ['cache_read', 'cache_read_tokens'],
  ['cache_write', 'cache_write_tokens'],
  ['reasoning', 'reasoning_tokens'],
] as const;

/** Counts one finished proxied request (called with its log row, after the response). */
export function observeRow(m: Metrics, row: RequestLogRow): void {
  const provider = row.provider;
  const status = String(row.status);
  m.requestTally.add(
    `${provider} ${status} ${row.outcome}`,
    () => ({ provider, status, outcome: row.outcome }),
    1,
  );
  m.latency.observe({ provider }, row.latency_ms / 1000);
  if (row.ttfb_ms !== null && row.status > 0) m.ttfb.observe({ provider }, row.ttfb_ms / 1000);
  for (const [type, field] of TOKEN_FIELDS) {
    const n = row[field];
    // A counter cannot go down, and a bad figure must not break every later scrape.
    if (n && n > 0 && Number.isFinite(n))
      m.tokenTally.add(`${provider} ${type}`, () => ({ provider, type }), n);
  }
  if (row.cost_usd && row.cost_usd > 0 && Number.isFinite(row.cost_usd))
    m.costTally.add(provider, () => ({ provider }), row.cost_usd);
  if (row.tool_uses) observeToolUses(m, provider, row.tool_uses, row.price_source);
}

/** Distinct (provider, fee, priced) label sets at most: fee names come from upstream responses. */
const TOOL_LABEL_SETS = 64;
const FEE_NAME = /^[a-z][a-z0-9_]{0,63}$/;

function observeToolUses(
  m: Metrics,
  provider: string,
  uses: Record<string, number>,
  priceSource: string | null,
): void {
  const unpriced = new Set(missingFees(priceSource ?? '').map(([fee]) => fee));
  for (const [fee, n] of Object.entries(uses)) {
    if (!FEE_NAME.test(fee) || !(n > 0) || !Number.isFinite(n)) continue;
    const priced = unpriced.has(fee) ? 'no' : 'yes';
    const key = `${provider} ${fee} ${priced}`;
    if (!m.toolLabels.has(key)) {
      if (m.toolLabels.size >= TOOL_LABEL_SETS) continue;
      m.toolLabels.add(key);
    }
    m.toolTally.add(key, () => ({ provider, fee, priced }), n);
  }
}
