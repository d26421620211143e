/**
 * Sessions: the calls that share a session id (proxy-session, Helicone-Session-Id, or the id Claude Code
 * and Codex send), one row each, newest first, over a range; filters and range in the address.
 */
import { useEffect, useState } from 'react';
import { api, type SessionSummary } from '../api.js';
import { PageHeader } from '../components/page-header.js';
import { KeySelect, ProviderSelect } from '../components/request-filters.js';
import { EmptyState, ErrorState, SkeletonRows } from '../components/states.js';
import { Tabs } from '../components/tabs.js';
import { formatCompact, formatCost, formatDateTime, formatNumber } from '../lib/format.js';
import { useAction } from '../lib/use-action.js';
import { useAsync } from '../lib/use-async.js';
import { formatDuration, RANGE_ITEMS, readRange, resolveRange, withParam } from '../lib/view-range.js';
import { Link, navigate, useLocation } from '../router.js';

const PAGE_SIZE = 50;
const TEXT_FILTERS = ['model', 'end_user'] as const;

export function sessionPath(session: string): string {
  return `/sessions/${encodeURIComponent(session)}`;
}

export function endUserPath(endUser: string): string {
  return `/end-users/${encodeURIComponent(endUser)}`;
}

function TextFilter({
  id,
  label,
  value,
  onCommit,
  placeholder,
}: {
  id: string;
  label: string;
  value: string | undefined;
  onCommit: (v: string | undefined) => void;
  placeholder: string;
}) {
  return (
    <div className="field field-inline">
      <label htmlFor={id}>{label}</label>
      <input
        id={id}
        defaultValue={value ?? ''}
        key={value ?? ''}
        placeholder={placeholder}
        maxLength={256}
        onKeyDown={(e) => {
          if (e.key === 'Enter') onCommit(e.currentTarget.value.trim() || undefined);
        }}
        onBlur={(e) => {
          if ((e.target.value.trim() || undefined) !== value) onCommit(e.target.value.trim() || undefined);
        }}
      />
    </div>
  );
}

export function SessionCost({
  s,
}: {
  s: Pick<SessionSummary, 'cost_usd' | 'requests' | 'unknown_cost_requests'>;
}) {
  if (s.unknown_cost_requests === s.requests) return <span className="muted">unpriced</span>;
  return (
    <>
      {formatCost(s.cost_usd)}
      {s.unknown_cost_requests > 0 && (
        <span className="muted small" title="Calls whose model has no known price: not in this sum">
          {' '}
          + {formatNumber(s.unknown_cost_requests)} unpriced
        </span>
      )}
    </>
  );
}

function SessionRows({ rows }: { rows: SessionSummary[] }) {
  return (
    <>
      {rows.map((s) => (
        <tr key={s.session} className="clickable" onClick={() => navigate(sessionPath(s.session))}>
          <td className="stack-title">
            <Link
              className="row-link cap"
              to={sessionPath(s.session)}
              onClick={(e) => e.stopPropagation()}
              title={s.session}
            >
              {s.session}
            </Link>
          </td>
          <td className="nowrap" data-label="Started">
            {formatDateTime(s.started_at)}
          </td>
          <td className="num nowrap" data-label="Duration">
            {formatDuration(s.duration_ms)}
          </td>
          <td className="num" data-label="Calls">
            <span>
              {formatNumber(s.requests)}
              {s.errors > 0 && <span className="muted small"> · {formatNumber(s.errors)} failed</span>}
            </span>
          </td>
          <td className="num nowrap" data-label="Tokens in / out">
            {formatCompact(s.input_tokens)} / {formatCompact(s.output_tokens)}
          </td>
          <td className="num nowrap" data-label="Cost">
            <span>
              <SessionCost s={s} />
            </span>
          </td>
          <td data-label="Models">
            <span className="cap" title={s.models.join(', ')}>
              {s.models.join(', ') || <span className="muted">—</span>}
            </span>
          </td>
          <td data-label="End user">
            {s.end_users.length === 0 ? (
              <span className="muted">—</span>
            ) : (
              <span>
                {s.end_users.map((u, i) => (
                  <span key={u}>
                    {i > 0 && ', '}
                    <Link to={endUserPath(u)} onClick={(e) => e.stopPropagation()} className="cap">
                      {u}
                    </Link>
                  </span>
                ))}
              </span>
            )}
          </td>
        </tr>
      ))}
    </>
  );
}

export function SessionsPage() {
  const { pathname, search, query } = useLocation();
  const range = readRange(query, '7d');
  const filters = {
    key_id: query.get('key_id') ?? undefined,
    provider: query.get('provider') ?? undefined,
    model: query.get('model') ?? undefined,
    end_user: query.get('end_user') ?? undefined,
  };
  const set = (name: string, v: string | undefined) =>
    navigate(withParam(pathname, query, name, v), { replace: true });
  const keys = useAsync(() => api.listKeys(), []);
  // The range is resolved once per load, so "Load more" continues the same window.
  const first = useAsync(async () => {
    const span = resolveRange(range);
    const q = { from: span.from, to: span.to, ...filters, limit: PAGE_SIZE };
    return { ...(await api.listSessions(q)), q };
  }, [search]);
  const [extra, setExtra] = useState<SessionSummary[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const more = useAction();
  const { setError: setMoreError } = more;
  useEffect(() => {
    setExtra([]);
    setCursor(first.data?.next_cursor ?? null);
    setMoreError(null);
  }, [first.data, setMoreError]);
  async function loadMore(): Promise<void> {
    const q = first.data?.q;
    if (!cursor || !q) return;
    await more.run(async () => {
      const page = await api.listSessions({ ...q, cursor });
      setExtra((x) => [...x, ...page.items]);
      setCursor(page.next_cursor);
    });
  }
  const rows = [...(first.data?.items ?? []), ...extra];
  const filtered = Object.values(filters).some(Boolean);

  return (
    <>
      <PageHeader
        title="Sessions"
        description="Calls that share a session id (proxy-session, Helicone-Session-Id, or a coding agent's own), newest first."
        actions={
          <Tabs
            idPrefix="s-range"
            size="sm"
            label="Time range"
            value={range}
            onChange={(id) => set('range', id)}
            items={RANGE_ITEMS}
          />
        }
      />
      <div className="filters" role="search" aria-label="Filter sessions">
        <KeySelect
          id="s-key"
          keys={keys.data?.keys ?? []}
          value={filters.key_id}
          onChange={(v) => set('key_id', v)}
        />
        <ProviderSelect id="s-provider" value={filters.provider} onChange={(v) => set('provider', v)} />
        {TEXT_FILTERS.map((name) => (
          <TextFilter
            key={name}
            id={`s-${name}`}
            label={name === 'model' ? 'Model' : 'End user'}
            placeholder={name === 'model' ? 'e.g. claude or gpt-5-mini' : 'exactly as sent'}
            value={filters[name]}
            onCommit={(v) => set(name, v)}
          />
        ))}
        {filtered && (
          <button
            type="button"
            className="btn btn-ghost btn-sm filters-clear"
            onClick={() =>
              navigate(withParam(pathname, new URLSearchParams({ range }), 'range', range), { replace: true })
            }
          >
            Clear filters
          </button>
        )}
      </div>
      <div id="s-range-panel" role="tabpanel" aria-labelledby={`s-range-tab-${range}`}>
        {first.error ? (
          <ErrorState error={first.error} onRetry={first.reload} />
        ) : first.data && rows.length === 0 ? (
          <EmptyState title={filtered ? 'No sessions match these filters' : 'No sessions in this range'}>
            A call joins a session when it sends <code>proxy-session</code> (or Helicone-Session-Id); Claude
            Code and Codex send their own.
          </EmptyState>
        ) : (
          <>
            <div className={`table-wrap card ${first.loading ? 'is-loading' : ''}`} aria-busy={first.loading}>
              <table className="table table-hover table-stack sessions-table" aria-label="Sessions">
                <thead>
                  <tr>
                    <th scope="col">Session</th>
                    <th scope="col">Started</th>
                    <th scope="col" className="num">
                      Duration
                    </th>
                    <th scope="col" className="num">
                      Calls
                    </th>
                    <th scope="col" className="num">
                      Tokens in / out
                    </th>
                    <th scope="col" className="num">
                      Cost
                    </th>
                    <th scope="col">Models</th>
                    <th scope="col">End user</th>
                  </tr>
                </thead>
                <tbody>{first.data ? <SessionRows rows={rows} /> : <SkeletonRows cols={8} rows={6} />}</tbody>
              </table>
            </div>
            <div className="load-more">
              {more.error && (
                <span className="form-error small" role="alert">
                  {more.error}
                </span>
              )}
              {cursor ? (
                <button
                  type="button"
                  className="btn btn-secondary"
                  disabled={more.busy}
                  onClick={() => void loadMore()}
                >
                  {more.busy ? 'Loading…' : 'Load more'}
                </button>
              ) : (
                first.data && (
                  <span className="muted small">{formatNumber(rows.length)} sessions · end of range</span>
                )
              )}
            </div>
          </>
        )}
      </div>
    </>
  );
}
