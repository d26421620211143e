import { useMemo } from 'react';
import { api, type UsageBreakdownRow } from '../api.js';
import { CostChart, LatencyChart, RequestsChart, TokensChart } from '../components/charts.js';
import { PageHeader } from '../components/page-header.js';
import { EmptyState, ErrorState, LoadingState } from '../components/states.js';
import { Tabs } from '../components/tabs.js';
import { fillBuckets, USAGE_RANGES, type UsageRange } from '../lib/buckets.js';
import { formatCompact, formatCost, formatMs, formatNumber } from '../lib/format.js';
import { useAsync } from '../lib/use-async.js';
import { Link, navigate, useLocation } from '../router.js';

function Breakdown({
  title,
  rows,
  label,
  linkFor,
}: {
  title: string;
  rows: UsageBreakdownRow[];
  label: (g: string) => string;
  linkFor: (g: string) => string;
}) {
  const max = Math.max(1, ...rows.map((r) => r.requests));
  const sorted = [...rows].sort((a, b) => b.requests - a.requests);
  return (
    <section className="card breakdown" aria-label={title}>
      <h2>{title}</h2>
      {sorted.length === 0 ? (
        <p className="muted small">No traffic in this range.</p>
      ) : (
        <div className="table-wrap">
          <table className="table table-compact table-stack">
            <thead>
              <tr>
                <th scope="col">{title.replace('By ', '').replace(/^./, (c) => c.toUpperCase())}</th>
                <th scope="col" className="num">
                  Requests
                </th>
                <th scope="col" className="num">
                  Tokens in / out
                </th>
                <th scope="col" className="num">
                  Cost
                </th>
                <th scope="col" className="num">
                  p95
                </th>
              </tr>
            </thead>
            <tbody>
              {sorted.map((r) => (
                <tr key={r.group}>
                  <td className="stack-title">
                    <Link to={linkFor(r.group)}>{label(r.group)}</Link>
                    <span className="bar" aria-hidden="true">
                      <span style={{ width: `${(r.requests / max) * 100}%` }} />
                    </span>
                  </td>
                  <td className="num" data-label="Requests">
                    {formatNumber(r.requests)}
                  </td>
                  <td className="num nowrap" data-label="Tokens in / out">
                    {formatCompact(r.input_tokens)} / {formatCompact(r.output_tokens)}
                  </td>
                  <td className="num nowrap" data-label="Cost">
                    {r.unknown_cost_requests === r.requests ? (
                      <span className="muted">unknown</span>
                    ) : (
                      <>
                        {formatCost(r.cost_usd)}
                        {r.unknown_cost_requests > 0 && (
                          <span className="muted small" title="requests without a known price">
                            {' '}
                            +{r.unknown_cost_requests}?
                          </span>
                        )}
                      </>
                    )}
                  </td>
                  <td className="num nowrap" data-label="Latency p95">
                    {formatMs(r.latency_p95_ms)}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

export function UsagePage() {
  const { query, search } = useLocation();
  const rangeId =
    (query.get('range') ?? '24h') in USAGE_RANGES ? ((query.get('range') ?? '24h') as UsageRange) : '24h';
  const range = USAGE_RANGES[rangeId];

  const data = useAsync(async () => {
    const to = Date.now();
    const from = to - range.ms;
    const q = { from: new Date(from).toISOString(), to: new Date(to).toISOString() };
    const [series, byModel, byKey, keys] = await Promise.all([
      api.usageSeries({ ...q, bucket: range.bucket }),
      api.usageBreakdown({ ...q, by: 'model' }),
      api.usageBreakdown({ ...q, by: 'key_id' }),
      api.listKeys(),
    ]);
    return { from, to, points: series.points, byModel: byModel.rows, byKey: byKey.rows, keys: keys.keys };
  }, [search]);

  const chart = useMemo(
    () => (data.data ? fillBuckets(data.data.points, data.data.from, data.data.to, range.bucket) : []),
    [data.data, range.bucket],
  );
  const keyLabel = useMemo(() => {
    const m = new Map((data.data?.keys ?? []).map((k) => [k.id, k.name]));
    return (id: string) => m.get(id) ?? id;
  }, [data.data]);

  const props = { data: chart, bucket: range.bucket, rangeMs: range.ms };
  const empty = data.data && data.data.points.every((p) => p.requests === 0);

  return (
    <>
      <PageHeader
        title="Usage"
        description="Requests, tokens, cost and latency across all your keys."
        actions={
          <Tabs
            idPrefix="range"
            size="sm"
            label="Time range"
            value={rangeId}
            onChange={(id) => navigate(`/usage?range=${id}`, { replace: true })}
            items={Object.entries(USAGE_RANGES).map(([id, r]) => ({ id, label: r.label }))}
          />
        }
      />
      <div id="range-panel" role="tabpanel" aria-labelledby={`range-tab-${rangeId}`}>
        {data.error ? (
          <ErrorState error={data.error} onRetry={data.reload} />
        ) : !data.data ? (
          <LoadingState label="Loading usage…" />
        ) : (
          <>
            {empty && (
              <EmptyState title="No traffic in this range">
                Pick a longer range, or <Link to="/">make your first call</Link>.
              </EmptyState>
            )}
            <div className="chart-grid">
              <RequestsChart {...props} />
              <TokensChart {...props} />
              <CostChart {...props} />
              <LatencyChart {...props} />
            </div>
            <div className="breakdown-grid">
              <Breakdown
                title="By model"
                rows={data.data.byModel}
                label={(g) => g || '(no model)'}
                linkFor={(g) => `/requests?model=${encodeURIComponent(g)}&range=${rangeId}`}
              />
              <Breakdown
                title="By key"
                rows={data.data.byKey}
                label={keyLabel}
                linkFor={(g) => `/requests?key_id=${encodeURIComponent(g)}&range=${rangeId}`}
              />
            </div>
          </>
        )}
      </div>
    </>
  );
}
