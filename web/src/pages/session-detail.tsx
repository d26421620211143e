/**
 * One session as a timeline: its totals, then every call in order with its offset from the session's
 * start, model, tokens, cost, latency and status, each linking to the request. An agent run read call by call.
 */
import { useEffect, useState } from 'react';
import { api, type RequestSummary } from '../api.js';
import { StatusBadge } from '../components/badge.js';
import { PageHeader } from '../components/page-header.js';
import { StatGrid } from '../components/stat-grid.js';
import { ErrorState, LoadingState } from '../components/states.js';
import { callCostText, formatCompact, formatDateTime, formatMs, formatNumber } from '../lib/format.js';
import { useAction } from '../lib/use-action.js';
import { useAsync } from '../lib/use-async.js';
import { formatDuration, formatOffset } from '../lib/view-range.js';
import { Link, navigate } from '../router.js';
import { endUserPath, SessionCost } from './sessions.js';

function CallRow({ r, n, start, span }: { r: RequestSummary; n: number; start: number; span: number }) {
  const offset = Date.parse(r.created_at) - start;
  const to = `/requests/${encodeURIComponent(r.id)}`;
  return (
    <tr className="clickable" data-outcome={r.outcome} onClick={() => navigate(to)}>
      <td className="stack-title timeline-cell">
        <span className="timeline-head">
          <span className="muted">#{n}</span>{' '}
          <Link
            className="row-link mono"
            to={to}
            onClick={(e) => e.stopPropagation()}
            title={formatDateTime(r.created_at)}
          >
            {formatOffset(offset)}
          </Link>
        </span>
        <span className="timeline-track" aria-hidden="true">
          <span
            style={{
              left: `${(offset / span) * 100}%`,
              width: `max(2px, ${(r.latency_ms / span) * 100}%)`,
            }}
          />
        </span>
      </td>
      <td data-label="Model">
        <span className="cap" title={r.model ?? ''}>
          {r.model ?? <span className="muted">—</span>}
        </span>
      </td>
      <td className="num nowrap" data-label="Tokens in / out">
        {formatNumber(r.input_tokens)} / {formatNumber(r.output_tokens)}
      </td>
      <td className={`num nowrap ${r.cost_usd === null ? 'muted' : ''}`} data-label="Cost">
        {callCostText(r)}
      </td>
      <td className="num nowrap" data-label="Latency">
        {formatMs(r.latency_ms)}
      </td>
      <td data-label="Status">
        <StatusBadge status={r.status} outcome={r.outcome} />
      </td>
    </tr>
  );
}

export function SessionDetailPage({ id }: { id: string }) {
  const data = useAsync(() => api.getSession(id), [id]);
  const [extra, setExtra] = useState<RequestSummary[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const more = useAction();
  const { setError: setMoreError } = more;
  useEffect(() => {
    setExtra([]);
    setCursor(data.data?.next_cursor ?? null);
    setMoreError(null);
  }, [data.data, setMoreError]);

  if (data.error) return <ErrorState error={data.error} onRetry={data.reload} />;
  if (!data.data) return <LoadingState label="Loading session…" />;
  const { session: s } = data.data;
  const calls = [...data.data.calls, ...extra];
  const start = Date.parse(s.started_at);
  const span = Math.max(1, s.duration_ms);

  return (
    <>
      <PageHeader
        title="Session"
        description={
          <>
            <code className="break-all">{s.session}</code> · {formatDateTime(s.started_at)} →{' '}
            {formatDateTime(s.ended_at)}
          </>
        }
        actions={
          <>
            <Link className="btn btn-secondary" to="/sessions">
              All sessions
            </Link>
            <Link className="btn btn-secondary" to={`/requests?session=${encodeURIComponent(s.session)}`}>
              In the request log
            </Link>
          </>
        }
      />
      <StatGrid
        label="Session totals"
        items={[
          {
            label: 'Calls',
            value: formatNumber(s.requests),
            note: s.errors > 0 ? `${formatNumber(s.errors)} failed` : undefined,
          },
          { label: 'Duration', value: formatDuration(s.duration_ms) },
          {
            label: 'Tokens',
            value: formatCompact(s.input_tokens + s.output_tokens),
            note: `${formatNumber(s.input_tokens)} in · ${formatNumber(s.output_tokens)} out`,
          },
          { label: 'Cost', value: <SessionCost s={s} /> },
        ]}
      />
      <p className="muted small session-meta">
        Models: {s.models.join(', ') || '—'}
        {s.end_users.length > 0 && (
          <>
            {' · '}End user{s.end_users.length > 1 ? 's' : ''}:{' '}
            {s.end_users.map((u, i) => (
              <span key={u}>
                {i > 0 && ', '}
                <Link to={endUserPath(u)}>{u}</Link>
              </span>
            ))}
          </>
        )}
      </p>
      <section className="section timeline" aria-labelledby="timeline-title">
        <h2 id="timeline-title">Timeline</h2>
        <div className="table-wrap card">
          <table className="table table-hover table-stack timeline-table" aria-label="Calls in order">
            <thead>
              <tr>
                <th scope="col">Call · time from start</th>
                <th scope="col">Model</th>
                <th scope="col" className="num">
                  Tokens in / out
                </th>
                <th scope="col" className="num">
                  Cost
                </th>
                <th scope="col" className="num">
                  Latency
                </th>
                <th scope="col">Status</th>
              </tr>
            </thead>
            <tbody>
              {calls.map((r, i) => (
                <CallRow key={r.id} r={r} n={i + 1} start={start} span={span} />
              ))}
            </tbody>
          </table>
        </div>
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
                  const page = await api.getSession(id, cursor);
                  setExtra((x) => [...x, ...page.calls]);
                  setCursor(page.next_cursor);
                })
              }
            >
              {more.busy ? 'Loading…' : 'Load more calls'}
            </button>
          )}
        </div>
      </section>
    </>
  );
}
