/** A usage breakdown as a ranked table, and the attribution breakdown with its choice of grouping. */
import { type BreakdownBy, type UsageBreakdownRow } from '../api.js';
import { formatCompact, formatCost, formatMs, formatNumber } from '../lib/format.js';
import { Link } from '../router.js';

export const RANKS = ['requests', 'cost', 'tokens'] as const;
export type Rank = (typeof RANKS)[number];

/** The third breakdown: who and what the traffic was for. */
export const ATTRIBUTION_TITLES: Record<string, string> = {
  end_user: 'By end user',
  session: 'By session',
  credential_fingerprint: 'By provider credential',
};

export function Breakdown({
  title,
  rows,
  label,
  linkFor,
  unlinkedTitle = 'Requests keyrelay refused before reading their body, so no model is known',
  keepOrder = false,
}: {
  title: string;
  rows: UsageBreakdownRow[];
  label: (g: string) => string;
  /** null: the group cannot be shown as a request filter (e.g. requests without a model). */
  linkFor: (g: string) => string | null;
  /** What a group without a link is, on hover. */
  unlinkedTitle?: string;
  /** Rows come ranked by the server: shown in that order. */
  keepOrder?: boolean;
}) {
  const max = Math.max(1, ...rows.map((r) => r.requests));
  const sorted = keepOrder ? rows : [...rows].sort((a, b) => b.requests - a.requests);
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
                    {linkFor(r.group) ? (
                      <Link to={linkFor(r.group)!}>{label(r.group)}</Link>
                    ) : (
                      <span className="muted" title={unlinkedTitle}>
                        {label(r.group)}
                      </span>
                    )}
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
                      <span className="muted">unpriced</span>
                    ) : (
                      <>
                        {formatCost(r.cost_usd)}
                        {r.unknown_cost_requests > 0 && (
                          <span
                            className="muted small unpriced"
                            title="Requests whose model has no known price: their cost is not in this sum"
                          >
                            {' '}
                            + {formatNumber(r.unknown_cost_requests)} unpriced
                          </span>
                        )}
                        {r.partial_cost_requests > 0 && (
                          <span
                            className="muted small unpriced"
                            title="Requests whose cost leaves out a tool fee without a price: this sum is a lower bound"
                          >
                            {' '}
                            · {formatNumber(r.partial_cost_requests)} partial
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

/**
 * Who and what the traffic was for: end users, sessions, provider credentials (their keyed fingerprint,
 * never the credential) or one custom property's values, each linking to its requests where the log filters
 * by it.
 */
export function AttributionBreakdown({
  by,
  rank,
  rows,
  totalGroups,
  onBy,
  onRank,
  requestsLink,
}: {
  by: BreakdownBy;
  rank: Rank;
  rows: UsageBreakdownRow[];
  totalGroups: number;
  onBy: (by: BreakdownBy) => void;
  onRank: (rank: Rank) => void;
  requestsLink: (extra: Record<string, string>) => string;
}) {
  const property = by.startsWith('property:') ? by.slice(9) : null;
  const title = property !== null ? `By ${property}` : (ATTRIBUTION_TITLES[by] ?? 'By end user');
  const linkFor = (g: string): string | null => {
    if (g === '') return null;
    if (property !== null) return requestsLink({ property: `${property}:${g}` });
    // Each end user and session has a page of its own (its timeline, its requests).
    if (by === 'end_user') return `/end-users/${encodeURIComponent(g)}`;
    if (by === 'session') return `/sessions/${encodeURIComponent(g)}`;
    return null;
  };
  return (
    <div className="attribution">
      <div className="filters" role="group" aria-label="Break usage down by">
        <div className="field field-inline">
          <label htmlFor="u-by">Break down by</label>
          <select
            id="u-by"
            value={property !== null ? 'property' : by}
            onChange={(e) => {
              const v = e.target.value;
              onBy(v === 'property' ? `property:${property ?? 'env'}` : (v as BreakdownBy));
            }}
          >
            <option value="end_user">End user</option>
            <option value="session">Session</option>
            <option value="credential_fingerprint">Provider credential</option>
            <option value="property">Property…</option>
          </select>
        </div>
        <div className="field field-inline">
          <label htmlFor="u-rank">Rank by</label>
          <select id="u-rank" value={rank} onChange={(e) => onRank(e.target.value as Rank)}>
            <option value="requests">Requests</option>
            <option value="cost">Cost</option>
            <option value="tokens">Tokens</option>
          </select>
        </div>
        {property !== null && (
          <div className="field field-inline">
            <label htmlFor="u-prop">Property name</label>
            <input
              id="u-prop"
              defaultValue={property}
              key={property}
              maxLength={64}
              onKeyDown={(e) => {
                const v = e.currentTarget.value.trim().toLowerCase();
                if (e.key === 'Enter' && v) onBy(`property:${v}`);
              }}
              onBlur={(e) => {
                const v = e.target.value.trim().toLowerCase();
                if (v && v !== property) onBy(`property:${v}`);
              }}
            />
          </div>
        )}
      </div>
      <Breakdown
        title={title}
        rows={rows}
        label={(g) => g || '(none)'}
        linkFor={linkFor}
        keepOrder
        unlinkedTitle={
          by === 'credential_fingerprint'
            ? 'A keyed fingerprint of the provider credential: never the credential itself'
            : 'Requests without this value'
        }
      />
      {totalGroups > rows.length && (
        <p className="muted small">
          The top {formatNumber(rows.length)} of {formatNumber(totalGroups)}.
        </p>
      )}
    </div>
  );
}
