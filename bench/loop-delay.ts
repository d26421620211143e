import { monitorEventLoopDelay } from 'node:perf_hooks';

/**
 * Event-loop delay for the bench's own servers, exposed under the metric name prom-client uses, so the
 * parent reads the fake upstream, the bare proxy and keyrelay the same way. Reset on every read, like
 * prom-client: a read after a load phase covers that phase.
 */
export function startLoopDelayMetrics(): () => string {
  const h = monitorEventLoopDelay({ resolution: 10 });
  h.enable();
  return () => {
    const p99 = h.count > 0 ? h.percentile(99) / 1e9 : 0;
    h.reset();
    return `# TYPE nodejs_eventloop_lag_p99_seconds gauge\nnodejs_eventloop_lag_p99_seconds ${p99}\n`;
  };
}
