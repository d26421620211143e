import type { ReactNode } from 'react';
import { ApiError, api, type CostBreakdown, type RequestLogRow } from '../api.js';
import { Badge, ErrorCodeBadge, StatusBadge } from '../components/badge.js';
import { BodyView } from '../components/body-view.js';
import { EmptyState, ErrorState, LoadingState } from '../components/states.js';
import {
  COST_PART_LABELS,
  formatBytes,
  formatCost,
  formatDateTime,
  formatMs,
  formatNumber,
  formatRate,
  isPartial,
  OUTCOME_LABELS,
  PROVIDER_LABELS,
} from '../lib/format.js';
import { ERROR_CODE_EXPLANATIONS, ERROR_CODE_LABELS } from '../lib/limits.js';
import { useAsync } from '../lib/use-async.js';
import { Link } from '../router.js';

const USAGE_SOURCE_TEXT: Record<string, string> = {
  provider: 'reported by the provider',
  estimated: 'estimated by keyrelay (the provider reported none)',
  partial: 'partial (the stream ended early)',
  none: 'not available',
};

function Facts({ items }: { items: [string, ReactNode][] }) {
  return (
    <dl className="facts">
      {items.map(([k, v]) => (
        <div key={k} className="fact">
          <dt>{k}</dt>
          <dd>{v}</dd>
        </div>
      ))}
    </dl>
  );
}

function HeaderTable({ title, headers }: { title: string; headers: Record<string, string> }) {
  const entries = Object.entries(headers).sort(([a], [b]) => a.localeCompare(b));
  return (
    <div className="header-table">
      <h3>{title}</h3>
      {entries.length === 0 ? (
        <p className="muted small">None logged.</p>
      ) : (
        <table className="table table-compact">
          <tbody>
            {entries.map(([k, v]) => (
              <tr key={k}>
                <th scope="row">{k}</th>
                <td>
                  <code>{v}</code>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}

/** The request log filtered to rows sharing one of this request's identifiers. */
function listOf(filter: string, value: string): string {
  return `/requests?${new URLSearchParams({ [filter]: value }).toString()}`;
}

function Card({ title, children }: { title: string; children: ReactNode }) {
  return (
    <section className="card detail-card">
      <h2>{title}</h2>
      {children}
    </section>
  );
}

/** How the cost was made: each part with its quantity, the rate it took and its cost. */
function CostParts({ b }: { b: CostBreakdown }) {
  return (
    <table className="table cost-parts" data-testid="cost-breakdown">
      <thead>
        <tr>
          <th scope="col">Part</th>
          <th scope="col" className="num">
            Quantity
          </th>
          <th scope="col" className="num">
            Rate
          </th>
          <th scope="col" className="num">
            Cost
          </th>
        </tr>
      </thead>
      <tbody>
        {b.lines.map((l) => (
          <tr key={l.part} title={l.note ?? undefined}>
            <th scope="row">
              {COST_PART_LABELS[l.part] ?? l.part}
              {l.tier_start !== null && ' *'}
            </th>
            <td className="num">{formatNumber(l.quantity)}</td>
            <td className={`num ${l.rate === null ? 'muted' : ''}`}>{formatRate(l.rate, l.per)}</td>
            <td className={`num ${l.cost === null ? 'muted' : ''}`}>
              {l.cost === null ? 'not priced' : formatCost(l.cost)}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function Detail({ r, breakdown }: { r: RequestLogRow; breakdown: CostBreakdown | null }) {
  const tiers = breakdown?.lines.flatMap((l) => (l.tier_start === null ? [] : [l.tier_start])) ?? [];
  const tierStart = tiers.length > 0 ? Math.max(...tiers) : null;
  const keys = useAsync(() => api.listKeys(), []);
  const key = keys.data?.keys.find((k) => k.id === r.key_id);
  const props = Object.entries(r.properties ?? {});
  const contentType = Object.entries(r.response_headers).find(
    ([k]) => k.toLowerCase() === 'content-type',
  )?.[1];
  const n = (v: number | null) => (v === null ? <span className="muted">—</span> : formatNumber(v));

  return (
    <>
      <nav className="breadcrumb" aria-label="Breadcrumb">
        <Link to="/requests">← Requests</Link>
        {r.connection_id && (
          <>
            {' · '}
            <Link to={`/connections/${encodeURIComponent(r.connection_id)}`}>WebSocket connection</Link>
          </>
        )}
      </nav>
      <header className="page-header detail-header">
        <div>
          <h1 className="detail-title">
            <span className="method">{r.method}</span> <span className="path">{r.path}</span>
          </h1>
          <p className="muted detail-meta">
            <StatusBadge status={r.status} outcome={r.outcome} /> {OUTCOME_LABELS[r.outcome] ?? r.outcome}
            {r.error_code && (
              <>
                {' '}
                <ErrorCodeBadge code={r.error_code} /> <code>{r.error_code}</code>
              </>
            )}{' '}
            · <Link to={listOf('provider', r.provider)}>{PROVIDER_LABELS[r.provider] ?? r.provider}</Link> ·{' '}
            {r.model ? <Link to={listOf('model', `"${r.model}"`)}>{r.model}</Link> : 'no model'}{' '}
            {r.stream && <Badge tone="blue">stream</Badge>} · {formatDateTime(r.created_at)}
          </p>
        </div>
        <code className="muted small request-id" title="x-keyrelay-request-id">
          {r.id}
        </code>
      </header>

      {r.outcome === 'refused' && (
        <div className="callout refusal" role="note">
          <strong>Refused by keyrelay; nothing was sent upstream.</strong>{' '}
          {(r.error_code && ERROR_CODE_EXPLANATIONS[r.error_code]) ?? ''}{' '}
          {r.error_message && (
            <span data-testid="refusal-reason">The caller was told: “{r.error_message}”</span>
          )}{' '}
          {(r.error_code === 'proxy_rate_limited' ||
            r.error_code === 'proxy_budget_exceeded' ||
            r.error_code === 'proxy_key_forbidden') && (
            <>
              Change the key&rsquo;s limits on the <Link to="/keys">Keys</Link> page.
            </>
          )}
        </div>
      )}

      {r.outcome !== 'refused' && r.error_code && (
        <div className="callout refusal" role="note">
          <strong>{ERROR_CODE_LABELS[r.error_code] ?? r.error_code}.</strong>{' '}
          {r.error_message ?? ERROR_CODE_EXPLANATIONS[r.error_code] ?? ''}
        </div>
      )}

      <div className="detail-grid">
        <Card title="Timing">
          <Facts
            items={[
              ['Time to first byte', formatMs(r.ttfb_ms)],
              ['Total', formatMs(r.latency_ms)],
              ['Request size', formatBytes(r.request_bytes)],
              ['Response size', formatBytes(r.response_bytes)],
            ]}
          />
        </Card>
        <Card title="Usage">
          <Facts
            items={[
              ['Input tokens', n(r.input_tokens)],
              ['Cache read', n(r.cache_read_tokens)],
              ['Cache write', n(r.cache_write_tokens)],
              ['Output tokens', n(r.output_tokens)],
              ['Reasoning', n(r.reasoning_tokens)],
              ...(r.tool_uses
                ? Object.entries(r.tool_uses).map(([fee, count]): [string, ReactNode] => [
                    COST_PART_LABELS[fee] ?? fee,
                    formatNumber(count),
                  ])
                : []),
              [
                'Source',
                <span key="s" title={USAGE_SOURCE_TEXT[r.usage_source]}>
                  {r.usage_source}
                </span>,
              ],
            ]}
          />
        </Card>
        <Card title="Cost">
          <p className={`big-number ${r.cost_usd === null ? 'muted' : ''}`} data-testid="detail-cost">
            {(r.outcome === 'refused' || r.price_source?.startsWith('not billed')) && r.cost_usd === null
              ? '—'
              : formatCost(r.cost_usd)}
            {isPartial(r) && (
              <>
                {' '}
                <Badge tone="amber">partial</Badge>
              </>
            )}
          </p>
          <p className="muted small" data-testid="detail-price-source">
            {r.outcome === 'refused' && r.cost_usd === null
              ? 'Nothing: keyrelay refused the request before it reached the provider.'
              : r.cost_usd === null
                ? r.price_source?.startsWith('not billed')
                  ? 'Nothing: the provider bills no failed call.'
                  : `Unpriced: ${r.price_source?.replace(/^unpriced: /, '') ?? 'no price is known for this model, or there was no usage to price'}.`
                : isPartial(r)
                  ? `At least this much: ${r.price_source!.replace(/^partial: /, '')}.`
                  : `Priced with ${r.price_source ?? 'the price library'}.`}
          </p>
        </Card>
        <Card title="Context">
          <Facts
            items={[
              [
                'Key',
                <Link key="k" to={listOf('key_id', r.key_id)}>
                  {key ? `${key.name} (${key.hint})` : r.key_id}
                </Link>,
              ],
              [
                'End user',
                r.end_user ? (
                  <Link key="u" to={listOf('end_user', r.end_user)}>
                    {r.end_user}
                  </Link>
                ) : (
                  <span className="muted">—</span>
                ),
              ],
              [
                'Session',
                r.session ? (
                  <Link key="s" to={listOf('session', r.session)}>
                    {r.session}
                  </Link>
                ) : (
                  <span className="muted">—</span>
                ),
              ],
              ['Client IP', r.client_ip ?? <span className="muted">—</span>],
              ['User agent', r.user_agent ?? <span className="muted">—</span>],
              [
                'Credential',
                r.credential_fingerprint ? (
                  <code key="c">{r.credential_fingerprint.slice(0, 12)}…</code>
                ) : (
                  '—'
                ),
              ],
            ]}
          />
        </Card>
      </div>

      {breakdown && (
        <section className="card section">
          <h2>How the cost was made</h2>
          <p className="muted small">
            Rates from {breakdown.price_source} for {breakdown.price_model}, as they stood at the time of the
            request.
          </p>
          {tierStart !== null && (
            <p className="small" data-testid="cost-tier">
              * Long-context rate: the request&rsquo;s {formatNumber(r.input_tokens)} input tokens passed{' '}
              {formatNumber(tierStart)}, so the whole request is billed at the higher tier.
            </p>
          )}
          <div className="table-wrap">
            <CostParts b={breakdown} />
          </div>
        </section>
      )}

      {props.length > 0 && (
        <section className="card section">
          <h2>Properties</h2>
          <div className="props">
            {props.map(([k, v]) => (
              <Link key={k} className="prop" to={listOf('property', `${k}:${v}`)}>
                <span className="prop-k">{k}</span>
                <span className="prop-v">{v}</span>
              </Link>
            ))}
          </div>
        </section>
      )}

      <BodyView
        id="req-body"
        title="Request body"
        body={r.request_body}
        truncated={r.request_body_truncated}
        missing={
          r.outcome === 'refused' && r.request_bytes === 0
            ? 'Not read: keyrelay refused the request before reading its body.'
            : undefined
        }
      />
      <BodyView
        id="res-body"
        title="Response body"
        body={r.response_body}
        truncated={r.response_body_truncated}
        contentType={contentType}
        side="response"
        missing={
          r.outcome === 'refused'
            ? `Nothing from the provider: keyrelay answered ${r.status} itself${r.error_message ? `: “${r.error_message}”` : '.'}`
            : undefined
        }
      />

      <section className="card section">
        <h2>Headers</h2>
        <p className="muted small">Credentials are redacted before anything is stored.</p>
        <div className="headers-grid">
          <HeaderTable title="Request" headers={r.request_headers} />
          <HeaderTable title="Response" headers={r.response_headers} />
        </div>
      </section>
    </>
  );
}

export function RequestDetailPage({ id }: { id: string }) {
  const req = useAsync(() => api.getRequest(id), [id]);
  if (req.error instanceof ApiError && req.error.status === 404) {
    return (
      <EmptyState
        title="Request not found"
        action={
          <Link to="/requests" className="btn btn-secondary">
            Back to requests
          </Link>
        }
      >
        It may have been pruned by retention, or it belongs to another account.
      </EmptyState>
    );
  }
  if (req.error) return <ErrorState error={req.error} onRetry={req.reload} />;
  if (!req.data) return <LoadingState label="Loading request…" />;
  return <Detail r={req.data.request} breakdown={req.data.cost_breakdown} />;
}
