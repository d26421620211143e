import { useEffect, useMemo, useState } from 'react';
import { api, type RequestQuery, type RequestSummary } from '../api.js';
import { ErrorCodeBadge, StatusBadge } from '../components/badge.js';
import { PageHeader } from '../components/page-header.js';
import { Quickstart } from '../components/quickstart.js';
import { ConnectionTag, connectionRowClass } from '../components/connection-tag.js';
import { groupByConnection } from '../lib/connections.js';
import {
  RANGES,
  readFilters,
  RequestFilters,
  writeFilters,
  type Filters,
} from '../components/request-filters.js';
import { EmptyState, ErrorState, SkeletonRows, Spinner } from '../components/states.js';
import { formatCost, formatDateTime, formatMs, formatNumber, PROVIDER_LABELS } from '../lib/format.js';
import { useAsync } from '../lib/use-async.js';
import { Link, navigate, useLocation } from '../router.js';
import { useSession } from '../session.js';

const PAGE_SIZE = 50;

function toQuery(f: Filters): RequestQuery {
  const range = f.range ? RANGES[f.range] : undefined;
  return {
    key_id: f.key_id,
    provider: f.provider,
    model: f.model,
    outcome: f.outcome,
    status: f.status,
    property: f.property,
    from: range ? new Date(Date.now() - range.ms).toISOString() : undefined,
    limit: PAGE_SIZE,
  };
}

function Tokens({ r }: { r: RequestSummary }) {
  if (r.input_tokens === null && r.output_tokens === null) return <span className="muted">—</span>;
  return (
    <span title={`usage: ${r.usage_source}`}>
      {formatNumber(r.input_tokens)} <span className="muted">/</span> {formatNumber(r.output_tokens)}
      {r.usage_source === 'estimated' || r.usage_source === 'partial' ? (
        <span className="muted"> ~</span>
      ) : null}
    </span>
  );
}

export function RequestsPage() {
  const { info, revealedKey } = useSession();
  const { search, query } = useLocation();
  const filters = useMemo(() => readFilters(query), [search]);
  const keys = useAsync(() => api.listKeys(), []);
  const keyNames = useMemo(() => new Map((keys.data?.keys ?? []).map((k) => [k.id, k.name])), [keys.data]);

  const first = useAsync(() => api.listRequests(toQuery(filters)), [search]);
  const [extra, setExtra] = useState<RequestSummary[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const [moreBusy, setMoreBusy] = useState(false);
  const [moreError, setMoreError] = useState<string | null>(null);
  useEffect(() => {
    setExtra([]);
    setCursor(first.data?.next_cursor ?? null);
    setMoreError(null);
  }, [first.data]);

  async function loadMore(): Promise<void> {
    if (!cursor) return;
    setMoreBusy(true);
    setMoreError(null);
    try {
      const page = await api.listRequests({ ...toQuery(filters), cursor });
      setExtra((x) => [...x, ...page.items]);
      setCursor(page.next_cursor);
    } catch (e) {
      setMoreError((e as Error).message);
    } finally {
      setMoreBusy(false);
    }
  }

  const rows = [...(first.data?.items ?? []), ...extra];
  const filtered = Object.keys(filters).length > 0;
  const showEmpty = first.data && rows.length === 0;

  return (
    <>
      <PageHeader
        title="Requests"
        description="Every call through keyrelay, newest first."
        actions={
          <button type="button" className="btn btn-secondary" onClick={first.reload} disabled={first.loading}>
            {first.loading && first.data ? <Spinner label="Refreshing" /> : null}
            Refresh
          </button>
        }
      />
      <RequestFilters filters={filters} keys={keys.data?.keys ?? []} />
      {first.error ? (
        <ErrorState error={first.error} onRetry={first.reload} />
      ) : showEmpty && filtered ? (
        <EmptyState
          title="No requests match these filters"
          action={
            <button type="button" className="btn btn-secondary" onClick={() => writeFilters({})}>
              Clear filters
            </button>
          }
        />
      ) : showEmpty ? (
        <div className="card section">
          <EmptyState title="No requests yet">
            Make your first call through keyrelay and it shows up here within a second or two.
          </EmptyState>
          <Quickstart
            publicUrl={info.public_url}
            fullKey={revealedKey?.key ?? null}
            only={['curl', 'openai-sdk', 'anthropic-sdk']}
          />
        </div>
      ) : (
        <>
          <div className={`table-wrap card ${first.loading ? 'is-loading' : ''}`} aria-busy={first.loading}>
            <table className="table table-hover requests-table">
              <thead>
                <tr>
                  <th scope="col">Time</th>
                  <th scope="col">Key</th>
                  <th scope="col">Provider</th>
                  <th scope="col">Model</th>
                  <th scope="col">Status</th>
                  <th scope="col" className="num">
                    Tokens in / out
                  </th>
                  <th scope="col" className="num">
                    Cost
                  </th>
                  <th scope="col" className="num">
                    Latency
                  </th>
                </tr>
              </thead>
              <tbody>
                {!first.data ? (
                  <SkeletonRows cols={8} rows={8} />
                ) : (
                  groupByConnection(rows).map(({ row: r, ...line }) => (
                    <tr
                      key={r.id}
                      className={`clickable ${connectionRowClass(line.kind)}`}
                      onClick={() => navigate(`/requests/${encodeURIComponent(r.id)}`)}
                    >
                      <td className="nowrap c-time">
                        <Link
                          className="row-link"
                          to={`/requests/${encodeURIComponent(r.id)}`}
                          onClick={(e) => e.stopPropagation()}
                        >
                          {formatDateTime(r.created_at)}
                        </Link>
                      </td>
                      <td className="c-key">
                        {keyNames.get(r.key_id) ?? <code className="muted">{r.key_id.slice(0, 8)}</code>}
                      </td>
                      <td className="c-provider">{PROVIDER_LABELS[r.provider] ?? r.provider}</td>
                      <td className="model-cell c-model">
                        {r.model ?? <span className="muted">{r.path}</span>}
                        {r.stream && !r.connection_id && <span className="tag">stream</span>}
                        <ConnectionTag row={r} {...line} />
                      </td>
                      <td className="c-status">
                        <span className="status-badges">
                          <StatusBadge status={r.status} outcome={r.outcome} />
                          <ErrorCodeBadge code={r.error_code} />
                        </span>
                      </td>
                      <td className="num nowrap c-tokens">
                        <Tokens r={r} />
                      </td>
                      <td className={`num nowrap c-cost ${r.cost_usd === null ? 'muted' : ''}`}>
                        {/* A refusal never reached the provider: no cost, rather than an unknown one. */}
                        {/* A socket's own row has none either: its responses carry the cost. */}
                        {(r.outcome === 'refused' || line.kind === 'socket') && r.cost_usd === null
                          ? '—'
                          : formatCost(r.cost_usd)}
                      </td>
                      <td className="num nowrap c-latency">{formatMs(r.latency_ms)}</td>
                    </tr>
                  ))
                )}
              </tbody>
            </table>
          </div>
          <div className="load-more">
            {moreError && (
              <span className="form-error small" role="alert">
                {moreError}
              </span>
            )}
            {cursor ? (
              <button
                type="button"
                className="btn btn-secondary"
                disabled={moreBusy}
                onClick={() => void loadMore()}
              >
                {moreBusy ? 'Loading…' : 'Load more'}
              </button>
            ) : (
              first.data &&
              rows.length > 0 && <span className="muted small">{rows.length} requests · end of log</span>
            )}
          </div>
        </>
      )}
    </>
  );
}
