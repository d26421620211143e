import { useEffect, useMemo, useState } from 'react';
import { api, type RequestQuery, type RequestSort, type RequestSummary } from '../api.js';
import { useAction } from '../lib/use-action.js';
import { PageHeader } from '../components/page-header.js';
import { Quickstart } from '../components/quickstart.js';
import {
  propertyProblem,
  RANGES,
  searchProblem,
  readFilters,
  RequestFilters,
  writeFilters,
  type Filters,
} from '../components/request-filters.js';
import {
  ColumnPicker,
  readSort,
  RequestTable,
  sortParam,
  useOptionalColumns,
} from '../components/request-table.js';
import { EmptyState, ErrorState, Spinner } from '../components/states.js';
import { useAsync } from '../lib/use-async.js';
import { liveProblem, useLiveTail } from '../lib/use-live-tail.js';
import { navigate, useLocation } from '../router.js';
import { useSession } from '../session.js';

const PAGE_SIZE = 50;
const AUTO_REFRESH_MS = 5000;
const AUTO_REFRESH_KEY = 'keyrelay.requests.autoRefresh';

const ORDER_WORDS: Record<RequestSort['by'], Record<RequestSort['dir'], string>> = {
  time: { desc: 'newest first', asc: 'oldest first' },
  cost: { desc: 'dearest first', asc: 'cheapest first (unpriced last)' },
  tokens: { desc: 'most tokens first', asc: 'fewest tokens first' },
  latency: { desc: 'slowest first', asc: 'fastest first' },
};

function toQuery(f: Filters, sort?: RequestSort): RequestQuery {
  const range = f.range && f.range !== 'custom' ? RANGES[f.range] : undefined;
  const custom = f.range === 'custom';
  return {
    key_id: f.key_id,
    provider: f.provider,
    model: f.model,
    outcome: f.outcome,
    status: f.status,
    // A malformed one (e.g. from an edited URL) is flagged beside its field and left out of the query.
    property: propertyProblem(f.property) ? undefined : f.property,
    from: custom ? f.from : range ? new Date(Date.now() - range.ms).toISOString() : undefined,
    to: custom ? f.to : undefined,
    end_user: f.end_user,
    session: f.session,
    q: searchProblem(f.q) ? undefined : f.q,
    limit: PAGE_SIZE,
    sort: sort && sortParam(sort),
  };
}

/** Every row the filters select (not only those loaded), as a file. */
function ExportLinks({ query }: { query: RequestQuery }) {
  // An export streams newest first whatever the list's order.
  const { limit: _limit, cursor: _cursor, sort: _sort, ...filters } = query;
  return (
    <span className="export-links" role="group" aria-label="Export the filtered log">
      <a className="btn btn-secondary" href={api.exportUrl(filters, 'csv')} download>
        Export CSV
      </a>
      <a className="btn btn-secondary" href={api.exportUrl(filters, 'ndjson')} download>
        NDJSON
      </a>
    </span>
  );
}

export function RequestsPage() {
  const { info, revealedKey } = useSession();
  const { search, query } = useLocation();
  const filters = useMemo(() => readFilters(query), [query]);
  const sort = useMemo(() => readSort(query), [query]);
  function setSort(next: RequestSort): void {
    const qs = new URLSearchParams(query);
    const param = sortParam(next);
    if (param) qs.set('sort', param);
    else qs.delete('sort');
    const s = qs.toString();
    navigate(s ? `/requests?${s}` : '/requests', { replace: true });
  }
  const keys = useAsync(() => api.listKeys(), []);
  const keyNames = useMemo(() => new Map((keys.data?.keys ?? []).map((k) => [k.id, k.name])), [keys.data]);

  const first = useAsync(() => api.listRequests(toQuery(filters, sort)), [search]);
  const reloadFirst = first.reload;
  const [shown, toggleColumn] = useOptionalColumns();
  const [autoRefresh, setAutoRefresh] = useState(() => localStorage.getItem(AUTO_REFRESH_KEY) === '1');
  const [extra, setExtra] = useState<RequestSummary[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const more = useAction();
  const { busy: moreBusy, error: moreError, setError: setMoreError } = more;
  useEffect(() => {
    setExtra([]);
    setCursor(first.data?.next_cursor ?? null);
    setMoreError(null);
  }, [first.data, setMoreError]);

  async function loadMore(): Promise<void> {
    if (!cursor) return;
    await more.run(async () => {
      const page = await api.listRequests({ ...toQuery(filters, sort), cursor });
      setExtra((x) => [...x, ...page.items]);
      setCursor(page.next_cursor);
    });
  }

  // Auto-refresh reloads the newest page only while nothing older is loaded below it (it would be lost)
  // and the tab is visible.
  useEffect(() => {
    if (!autoRefresh || extra.length > 0) return;
    const t = setInterval(() => {
      if (document.visibilityState === 'visible') reloadFirst();
    }, AUTO_REFRESH_MS);
    return () => clearInterval(t);
  }, [autoRefresh, extra.length, reloadFirst]);

  const [liveOn, setLiveOn] = useState(false);
  const listQuery = toQuery(filters, sort);
  const liveBlocked = liveProblem(listQuery, filters.range === 'custom');
  const live = useLiveTail(liveOn && !liveBlocked, listQuery);
  const listed = [...(first.data?.items ?? []), ...extra];
  const known = new Set(live.rows.map((r) => r.id));
  const rows = [...live.rows, ...listed.filter((r) => !known.has(r.id))];
  const filtered = Object.keys(filters).length > 0;
  // Without the log's search index a page reads a bounded window of rows: an empty page with a cursor means
  // "none in the rows read so far", not "none at all".
  const showEmpty = first.data && rows.length === 0 && !first.data.next_cursor && !cursor;

  return (
    <>
      <PageHeader
        title="Requests"
        description={`Every call through keyrelay, ${ORDER_WORDS[sort.by][sort.dir]}.`}
        actions={
          <>
            <label className="btn btn-secondary auto-refresh">
              <input
                type="checkbox"
                checked={autoRefresh}
                onChange={(e) => {
                  setAutoRefresh(e.target.checked);
                  localStorage.setItem(AUTO_REFRESH_KEY, e.target.checked ? '1' : '0');
                }}
              />
              Auto-refresh
            </label>
            <button
              type="button"
              className={`btn ${liveOn && !liveBlocked ? 'btn-primary' : 'btn-secondary'}`}
              aria-pressed={liveOn && !liveBlocked}
              disabled={!!liveBlocked}
              title={liveBlocked ?? 'Show new requests as they finish'}
              onClick={() => setLiveOn((v) => !v)}
            >
              Live
            </button>
            {liveOn && !liveBlocked && (
              <button
                type="button"
                className="btn btn-secondary"
                onClick={live.paused ? live.resume : live.pause}
              >
                {live.paused ? `Resume${live.pending ? ` (${live.pending} new)` : ''}` : 'Pause'}
              </button>
            )}
            <ColumnPicker shown={shown} onToggle={toggleColumn} />
            <ExportLinks query={listQuery} />
            <button
              type="button"
              className="btn btn-secondary"
              onClick={first.reload}
              disabled={first.loading}
            >
              {first.loading && first.data ? <Spinner label="Refreshing" /> : null}
              Refresh
            </button>
          </>
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
          <RequestTable
            rows={first.data ? rows : undefined}
            loading={first.loading}
            keyNames={keyNames}
            shown={shown}
            sort={sort}
            onSort={setSort}
          />
          <div className="load-more">
            {moreError && (
              <span className="form-error small" role="alert">
                {moreError}
              </span>
            )}
            {cursor && rows.length === 0 && (
              <span className="muted small">No matches in the newest requests searched so far.</span>
            )}
            {cursor ? (
              <button
                type="button"
                className="btn btn-secondary"
                disabled={moreBusy}
                onClick={() => void loadMore()}
              >
                {moreBusy ? 'Loading…' : rows.length === 0 ? 'Search older requests' : 'Load more'}
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
