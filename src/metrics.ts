/** Prometheus metrics (prom-client). One registry per app so tests can run several apps in one process. */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { RequestLogRow } from './types.js';

export type Metrics = ReturnType<typeof createMetrics>;

export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: 10 });
  const latencyBuckets = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
  return {
    registry,
    requests: new Counter({
      name: 'keyrelay_requests_total',
      help: 'Proxied requests by provider, status and outcome.',
      labelNames: ['provider', 'status', 'outcome'] as const,
      registers: [registry],
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
    }),
    cost: new Counter({
      name: 'keyrelay_cost_usd_total',
      help: 'Known cost in USD by provider.',
      labelNames: ['provider'] as const,
      registers: [registry],
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
    redisUp: new Gauge({
      name: 'keyrelay_redis_up',
      help: '1 while the Redis connection used for revocation fan-out is ready (absent without Redis).',
      registers: [registry],
    }),
  };
}

/** Counts one finished proxied request (called with its log row, after the response). */
export function observeRow(m: Metrics, row: RequestLogRow): void {
  const provider = row.provider;
  m.requests.inc({ provider, status: String(row.status), outcome: row.outcome });
  m.latency.observe({ provider }, row.latency_ms / 1000);
  if (row.ttfb_ms !== null && row.status > 0) m.ttfb.observe({ provider }, row.ttfb_ms / 1000);
  if (row.input_tokens) m.tokens.inc({ provider, type: 'input' }, row.input_tokens);
  if (row.output_tokens) m.tokens.inc({ provider, type: 'output' }, row.output_tokens);
  if (row.cache_read_tokens) m.tokens.inc({ provider, type: 'cache_read' }, row.cache_read_tokens);
  if (row.cache_write_tokens) m.tokens.inc({ provider, type: 'cache_write' }, row.cache_write_tokens);
  if (row.reasoning_tokens) m.tokens.inc({ provider, type: 'reasoning' }, row.reasoning_tokens);
  if (row.cost_usd) m.cost.inc({ provider }, row.cost_usd);
}
