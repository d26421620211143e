/**
 * One end user (a `proxy-user` value): totals over a range, usage over time and its requests, with the
 * range in the address. Reached from the end-user breakdown and the session list.
 */
import { useEffect, useMemo, useState } from 'react';
import { api, type RequestSummary } from '../api.js';
import { CostChart, RequestsChart } from '../components/charts.js';
import { PageHeader } from '../components/page-header.js';
import { RequestTable, useOptionalColumns } from '../components/request-table.js';
import { StatGrid } from '../components/stat-grid.js';
import { ErrorState, LoadingState } from '../components/states.js';
import { Tabs } from '../components/tabs.js';
import { fillBuckets } from '../lib/buckets.js';
import { formatCompact, formatNumber } from '../lib/format.js';
import { useAction } from '../lib/use-action.js';
import { useAsync } from '../lib/use-async.js';
import { RANGE_ITEMS, readRange, resolveRange, withParam } from '../lib/view-range.js';
import { Link, navigate, useLocation } from '../router.js';
import { SessionCost } from './sessions.js';

const PAGE_SIZE = 50;

export function EndUserPage({ id }: { id: string }) {
  const { pathname, search, query } = useLocation();
  const range = readRange(query, '7d');
  const keys = useAsync(() => api.listKeys(), []);
  const keyNames = useMemo(() => new Map((keys.data?.keys ?? []).map((k) => [k.id, k.name])), [keys.data]);
  const data = useAsync(async () => {
    const span = resolveRange(range);
    const q = { from: span.from, to: span.to, end_user: id };
    const [totals, series, requests] = await Promise.all([
      api.usageBreakdown({ ...q, by: 'end_user' }),
      api.usageSeries({ ...q, bucket: span.bucket }),
      api.listRequests({ ...q, limit: PAGE_SIZE }),
    ]);
    return { span, q, totals: totals.rows[0] ?? null, points: series.points, requests };
  }, [id, search]);
  const [shown] = useOptionalColumns();
  const [extra, setExtra] = useState<RequestSummary[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const more = useAction();
  const { setError: setMoreError } = more;
  useEffect(() => {
    setExtra([]);
    setCursor(data.data?.requests.next_cursor ?? null);
    setMoreError(null);
  }, [data.data, setMoreError]);
  const chart = useMemo(() => {
    const d = data.data;
    return d ? fillBuckets(d.points, Date.parse(d.span.from), Date.parse(d.span.to), d.span.bucket) : [];
  }, [data.data]);

  const d = data.data;
  const t = d?.totals;
  const rows = [...(d?.requests.items ?? []), ...extra];
  const sessionsLink = `/sessions?${new URLSearchParams({ range, end_user: id }).toString()}`;
  return (
    <>
      <PageHeader
        title="End user"
        description={
          <>
            <code className="break-all">{id}</code>, as sent in <code>proxy-user</code> (or the provider's
            user field)
          </>
        }
        actions={
          <Tabs
            idPrefix="eu-range"
            size="sm"
            label="Time range"
            value={range}
            onChange={(r) => navigate(withParam(pathname, query, 'range', r), { replace: true })}
            items={RANGE_ITEMS}
          />
        }
      />
      <div id="eu-range-panel" role="tabpanel" aria-labelledby={`eu-range-tab-${range}`}>
        {data.error ? (
          <ErrorState error={data.error} onRetry={data.reload} />
        ) : !d ? (
          <LoadingState label="Loading end user…" />
        ) : (
          <>
            <StatGrid
              label="End user totals"
              items={[
                { label: 'Requests', value: formatNumber(t?.requests ?? 0) },
                { label: 'Errors', value: formatNumber(t?.errors ?? 0) },
                {
                  label: 'Tokens',
                  value: formatCompact((t?.input_tokens ?? 0) + (t?.output_tokens ?? 0)),
                  note: t
                    ? `${formatNumber(t.input_tokens)} in · ${formatNumber(t.output_tokens)} out`
                    : undefined,
                },
                {
                  label: 'Cost',
                  value: t ? <SessionCost s={t} /> : formatNumber(0),
                },
              ]}
            />
            <div className="chart-grid section">
              <CostChart data={chart} bucket={d.span.bucket} rangeMs={d.span.ms} />
              <RequestsChart data={chart} bucket={d.span.bucket} rangeMs={d.span.ms} />
            </div>
            <section className="section" aria-labelledby="eu-requests">
              <div className="section-head">
                <h2 id="eu-requests">Requests</h2>
                <span className="section-links">
                  <Link to={sessionsLink}>Sessions →</Link>{' '}
                  <Link to={`/requests?${new URLSearchParams({ end_user: id }).toString()}`}>
                    In the request log →
                  </Link>
                </span>
              </div>
              {rows.length === 0 ? (
                <p className="muted small">No requests from this end user in this range.</p>
              ) : (
                <RequestTable rows={rows} loading={data.loading} keyNames={keyNames} shown={shown} />
              )}
              <div className="load-more">
                {more.error && (
                  <span className="form-error small" role="alert">
                    {more.error}
                  </span>
                )}
                {cursor && (
                  <button
                    type="button"
                    className="btn btn-secondary"
                    disabled={more.busy}
                    onClick={() =>
                      void more.run(async () => {
                        const page = await api.listRequests({ ...d.q, limit: PAGE_SIZE, cursor });
                        setExtra((x) => [...x, ...page.items]);
                        setCursor(page.next_cursor);
                      })
                    }
                  >
                    {more.busy ? 'Loading…' : 'Load more'}
                  </button>
                )}
              </div>
            </section>
          </>
        )}
      </div>
    </>
  );
}
