import { monitorEventLoopDelay } from 'node:perf_hooks';

/**
 * Event-loop delay and heap for the bench's own servers, under the metric names prom-client uses, so the
 * parent reads the fake upstream, the bare proxy and keyrelay the same way. Reset on every read, like
 * prom-client: a read after a load phase covers that phase.
 */
export function startLoopDelayMetrics(): () => string {
  const h = monitorEventLoopDelay({ resolution: 10 });
  h.enable();
  return () => {
    const p99 = h.count > 0 ? h.percentile(99) / 1e9 : 0;
    h.reset();
    const mem = process.memoryUsage();
    return (
      `nodejs_eventloop_lag_p99_seconds ${p99}\n` +
      `nodejs_heap_size_used_bytes ${mem.heapUsed}\n` +
      `nodejs_external_memory_bytes ${mem.external}\n`
    );
  };
}
