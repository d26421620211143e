/**
 * The request log table. Columns size to their content (an identifier up to a generous cap; a longer one
 * ends in an ellipsis, the full text a hover away); when the columns shown need more than the card, the
 * table scrolls sideways rather than cut an identifier to a few letters. Optional columns are picked by
 * the user and remembered in this browser.
 */
import { useEffect, useRef, useState, type ReactNode } from 'react';
import type { RequestSort, RequestSummary } from '../api.js';
import {
  formatCost,
  formatDateTime,
  formatMs,
  formatNumber,
  isPartial,
  providerLabel,
} from '../lib/format.js';
import { Link, navigate } from '../router.js';
import { groupByConnection, type LogLine } from '../lib/connections.js';
import { ErrorCodeBadge, StatusBadge } from './badge.js';
import { ConnectionTag, connectionRowClass } from './connection-tag.js';
import { SkeletonRows } from './states.js';

interface Column {
  id: string;
  label: string;
  /** Least width (px, or a share of the table); its content may widen it. */
  width?: number | string;
  num?: boolean;
  optional?: boolean;
  /** Plain text for the tooltip of a cell that may be cut short. */
  title?: (r: RequestSummary, ctx: CellContext) => string | undefined;
  cell: (r: RequestSummary, ctx: CellContext) => ReactNode;
}

interface CellContext {
  keyNames: Map<string, string>;
  /** Where the row sits among WebSocket rows: a socket's responses are nested under it. */
  line: Omit<LogLine<RequestSummary>, 'row'>;
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

const keyName = (r: RequestSummary, ctx: CellContext) => ctx.keyNames.get(r.key_id);
/** An identifier shown whole up to a cap (styles: .cap), so one very long name cannot take the table. */
const Capped = ({ children }: { children: ReactNode }) => <span className="cap">{children}</span>;
const dash = <span className="muted">—</span>;

export const COLUMNS: Column[] = [
  {
    id: 'time',
    label: 'Time',
    width: 132,
    cell: (r) => (
      <Link
        className="row-link"
        to={`/requests/${encodeURIComponent(r.id)}`}
        onClick={(e) => e.stopPropagation()}
      >
        {formatDateTime(r.created_at)}
      </Link>
    ),
  },
  {
    id: 'key',
    label: 'Key',
    title: (r, ctx) => keyName(r, ctx) ?? r.key_id,
    cell: (r, ctx) => (
      <Capped>{keyName(r, ctx) ?? <code className="muted">{r.key_id.slice(0, 8)}</code>}</Capped>
    ),
  },
  {
    id: 'provider',
    label: 'Provider',
    width: 84,
    cell: (r) => providerLabel(r.provider),
  },
  {
    id: 'model',
    label: 'Model',
    title: (r) => r.model ?? undefined,
    // A refusal before the body was read has no model: say so, rather than show the path as one.
    cell: (r, ctx) => (
      <span className="cell-flex">
        <span className="ellipsis">{r.model ?? dash}</span>
        {r.stream && !r.connection_id && <span className="tag">stream</span>}
        <ConnectionTag row={r} {...ctx.line} />
      </span>
    ),
  },
  {
    id: 'status',
    label: 'Status',
    // As wide as its badges: "200" alone, or a status and the reason keyrelay refused.
    width: 64,
    cell: (r) => (
      <span className="status-badges">
        <StatusBadge status={r.status} outcome={r.outcome} />
        <ErrorCodeBadge code={r.error_code} />
      </span>
    ),
  },
  {
    id: 'end_user',
    label: 'End user',
    optional: true,
    title: (r) => r.end_user ?? undefined,
    cell: (r) => (r.end_user ? <Capped>{r.end_user}</Capped> : dash),
  },
  {
    id: 'session',
    label: 'Session',
    optional: true,
    title: (r) => r.session ?? undefined,
    cell: (r) => (r.session ? <Capped>{r.session}</Capped> : dash),
  },
  {
    id: 'properties',
    label: 'Properties',
    optional: true,
    title: (r) => propertiesText(r) || undefined,
    cell: (r) => (propertiesText(r) ? <Capped>{propertiesText(r)}</Capped> : dash),
  },
  {
    id: 'tokens',
    label: 'Tokens in / out',
    width: 108,
    num: true,
    cell: (r) => <Tokens r={r} />,
  },
  {
    id: 'cost',
    label: 'Cost',
    width: 92,
    num: true,
    // A refusal never reached the provider: no cost, rather than an unknown one. A socket's own row has
    // none either: its responses carry the cost.
    cell: (r, ctx) =>
      (r.outcome === 'refused' || ctx.line.kind === 'socket' || r.price_source?.startsWith('not billed')) &&
      r.cost_usd === null
        ? '—'
        : isPartial(r)
          ? `${formatCost(r.cost_usd)}+`
          : formatCost(r.cost_usd),
    // A partial cost leaves out a fee the price library has no rate for: at least this much.
    title: (r) => (isPartial(r) ? (r.price_source ?? undefined) : undefined),
  },
  {
    id: 'ttfb',
    label: 'TTFB',
    width: 84,
    num: true,
    optional: true,
    cell: (r) => (r.ttfb_ms === null ? dash : formatMs(r.ttfb_ms)),
  },
  { id: 'latency', label: 'Latency', width: 80, num: true, cell: (r) => formatMs(r.latency_ms) },
];

function propertiesText(r: RequestSummary): string {
  return Object.entries(r.properties ?? {})
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');
}

export const OPTIONAL_COLUMNS = COLUMNS.filter((c) => c.optional);

export const NEWEST_FIRST: RequestSort = { by: 'time', dir: 'desc' };
/** Columns whose header sorts the log (the server's sort keys). */
const SORTABLE: Record<string, RequestSort['by'] | undefined> = {
  time: 'time',
  tokens: 'tokens',
  cost: 'cost',
  latency: 'latency',
};
const SORT_WORDS: Record<RequestSort['by'], Record<RequestSort['dir'], string>> = {
  time: { desc: 'newest first', asc: 'oldest first' },
  tokens: { desc: 'most first', asc: 'fewest first' },
  cost: { desc: 'dearest first', asc: 'cheapest first' },
  latency: { desc: 'slowest first', asc: 'fastest first' },
};

/** The sort in the address (`sort=cost:desc`), or newest first when it names none this list knows. */
export function readSort(query: URLSearchParams): RequestSort {
  const [by, dir] = (query.get('sort') ?? '').split(':');
  if (by && by in SORT_WORDS && (dir === 'asc' || dir === 'desc'))
    return { by: by as RequestSort['by'], dir };
  return NEWEST_FIRST;
}

export const sortParam = (s: RequestSort): string | undefined =>
  s.by === NEWEST_FIRST.by && s.dir === NEWEST_FIRST.dir ? undefined : `${s.by}:${s.dir}`;
const STORAGE_KEY = 'keyrelay.requests.columns';

/** The optional columns this browser shows, remembered across visits. */
export function useOptionalColumns(): [Set<string>, (id: string, on: boolean) => void] {
  const [shown, setShown] = useState<Set<string>>(() => {
    try {
      const saved = JSON.parse(localStorage.getItem(STORAGE_KEY) ?? '[]') as unknown;
      return new Set(Array.isArray(saved) ? saved.filter((x): x is string => typeof x === 'string') : []);
    } catch {
      return new Set();
    }
  });
  const toggle = (id: string, on: boolean) =>
    setShown((prev) => {
      const next = new Set(prev);
      if (on) next.add(id);
      else next.delete(id);
      try {
        localStorage.setItem(STORAGE_KEY, JSON.stringify([...next]));
      } catch {
        // Private mode: the choice lasts for this page only.
      }
      return next;
    });
  return [shown, toggle];
}

/** The "Columns" button and its checklist of optional columns. */
export function ColumnPicker({
  shown,
  onToggle,
}: {
  shown: Set<string>;
  onToggle: (id: string, on: boolean) => void;
}) {
  const [open, setOpen] = useState(false);
  const ref = useRef<HTMLDivElement>(null);
  useEffect(() => {
    if (!open) return;
    const close = (e: MouseEvent | KeyboardEvent) => {
      if (e instanceof KeyboardEvent ? e.key === 'Escape' : !ref.current?.contains(e.target as Node))
        setOpen(false);
    };
    document.addEventListener('mousedown', close);
    document.addEventListener('keydown', close);
    return () => {
      document.removeEventListener('mousedown', close);
      document.removeEventListener('keydown', close);
    };
  }, [open]);
  return (
    <div className="menu-wrap" ref={ref}>
      <button
        type="button"
        className="btn btn-secondary"
        aria-expanded={open}
        aria-haspopup="true"
        onClick={() => setOpen((o) => !o)}
      >
        Columns
      </button>
      {open && (
        <div className="menu" role="group" aria-label="Optional columns">
          {OPTIONAL_COLUMNS.map((c) => (
            <label key={c.id} className="menu-check">
              <input
                type="checkbox"
                checked={shown.has(c.id)}
                onChange={(e) => onToggle(c.id, e.target.checked)}
              />
              {c.label}
            </label>
          ))}
        </div>
      )}
    </div>
  );
}

export function RequestTable({
  rows,
  loading,
  keyNames,
  shown,
  sort,
  onSort,
}: {
  rows: RequestSummary[] | undefined;
  loading: boolean;
  keyNames: Map<string, string>;
  shown: Set<string>;
  /** The order the rows come in (the server sorts); with onSort, the sortable headers are buttons. */
  sort?: RequestSort;
  onSort?: (s: RequestSort) => void;
}) {
  const columns = COLUMNS.filter((c) => !c.optional || shown.has(c.id));
  const current = sort ?? NEWEST_FIRST;
  // A socket's responses sit under it in time order only; sorted otherwise, each row stands alone.
  const lines =
    current.by === 'time'
      ? groupByConnection(rows ?? [])
      : (rows ?? []).map((row) => ({ row, kind: 'plain' as const, responses: 0 }));
  return (
    <div className={`table-wrap card requests-wrap ${loading ? 'is-loading' : ''}`} aria-busy={loading}>
      <table className="table table-hover requests-table">
        <colgroup>
          {columns.map((c) => (
            <col key={c.id} style={c.width ? { width: c.width } : undefined} />
          ))}
        </colgroup>
        <thead>
          <tr>
            {columns.map((c) => {
              const key = SORTABLE[c.id];
              if (!key || !onSort)
                return (
                  <th key={c.id} scope="col" className={`c-${c.id} ${c.num ? 'num' : ''}`}>
                    {c.label}
                  </th>
                );
              const active = current.by === key;
              // A first click shows the largest (or newest) first, a second the other way round.
              const next: RequestSort = { by: key, dir: active && current.dir === 'desc' ? 'asc' : 'desc' };
              return (
                <th
                  key={c.id}
                  scope="col"
                  className={`c-${c.id} ${c.num ? 'num' : ''}`}
                  aria-sort={active ? (current.dir === 'asc' ? 'ascending' : 'descending') : undefined}
                >
                  <button
                    type="button"
                    className={`sort-button ${active ? 'is-sorted' : ''}`}
                    onClick={() => onSort(next)}
                    title={`Sort by ${c.label.toLowerCase()}, ${SORT_WORDS[key][next.dir]}`}
                  >
                    {c.label}
                    <span className="sort-mark" aria-hidden="true">
                      {active ? (current.dir === 'asc' ? '▲' : '▼') : '↕'}
                    </span>
                  </button>
                </th>
              );
            })}
          </tr>
        </thead>
        <tbody>
          {!rows ? (
            <SkeletonRows cols={columns.length} rows={8} />
          ) : (
            lines.map(({ row: r, ...line }) => {
              const ctx: CellContext = { keyNames, line };
              return (
                <tr
                  key={r.id}
                  className={`clickable ${connectionRowClass(line.kind)}`}
                  data-outcome={r.outcome}
                  onClick={() => navigate(`/requests/${encodeURIComponent(r.id)}`)}
                >
                  {columns.map((c) => (
                    <td
                      key={c.id}
                      className={`c-${c.id} ${c.num ? 'num' : ''} ${c.id === 'cost' && r.cost_usd === null ? 'muted' : ''}`}
                      title={c.title?.(r, ctx)}
                    >
                      {c.cell(r, ctx)}
                    </td>
                  ))}
                </tr>
              );
            })
          )}
        </tbody>
      </table>
    </div>
  );
}
