import { api, type Reconciliation } from '../api.js';
import { Badge } from '../components/badge.js';
import { PageHeader } from '../components/page-header.js';
import { EmptyState, ErrorState, LoadingState } from '../components/states.js';
import { formatCost, formatNumber } from '../lib/format.js';
import { KeysTable, TokenLines, TokenTotals } from './reconcile-tokens.js';
import { useAsync } from '../lib/use-async.js';
import { Link, navigate, useLocation } from '../router.js';

const DAY = /^\d{4}-\d{2}-\d{2}$/;
const PROVIDER_LABELS: Record<string, string> = { openai: 'OpenAI', anthropic: 'Anthropic' };
const ADMIN_VARIABLES: Record<string, string> = {
  openai: 'OPENAI_ADMIN_KEY',
  anthropic: 'ANTHROPIC_ADMIN_KEY',
};

const yesterday = () => new Date(Date.now() - 86_400_000).toISOString().slice(0, 10);
const today = () => new Date().toISOString().slice(0, 10);

/** The difference with its sign: above zero, the provider billed more than keyrelay logged. */
function signed(usd: number): string {
  if (usd === 0) return '$0.00';
  return `${usd > 0 ? '+' : '−'}${formatCost(Math.abs(usd))}`;
}

type ProviderView = Reconciliation['providers'][number];
type ModelView = ProviderView['models'][number];
/** An unknown cost reads "unpriced", never $0; a known part with unpriced calls besides says both. */
function KeyrelayCost({ k }: { k: ModelView['keyrelay'] }) {
  if (k.requests > 0 && k.unpriced_requests === k.requests) return <span className="muted">unpriced</span>;
  return (
    <span>
      {formatCost(k.cost_usd)}
      {k.unpriced_requests > 0 && <span className="muted small"> + {k.unpriced_requests} unpriced</span>}
    </span>
  );
}

function ProviderCard({ p, onChanged }: { p: ProviderView; onChanged: () => void }) {
  const label = PROVIDER_LABELS[p.provider] ?? p.provider;
  return (
    <section className="card section" aria-labelledby={`rec-${p.provider}`}>
      <div className="reconcile-head">
        <h2 id={`rec-${p.provider}`}>{label}</h2>
        {p.agrees === null ? (
          <Badge tone="gray">Bill not read</Badge>
        ) : p.agrees ? (
          <Badge tone="green">Agrees</Badge>
        ) : (
          <Badge tone="amber">Drift</Badge>
        )}
      </div>
      <dl className="reconcile-totals">
        <div>
          <dt className="muted small">keyrelay logged</dt>
          <dd>{formatCost(p.keyrelay_cost_usd)}</dd>
        </div>
        <div>
          <dt className="muted small">{label} billed</dt>
          <dd>{p.provider_cost_usd === null ? '—' : formatCost(p.provider_cost_usd)}</dd>
        </div>
        <div>
          <dt className="muted small">Difference</dt>
          <dd>{p.difference_usd === null ? '—' : signed(p.difference_usd)}</dd>
        </div>
      </dl>
      {p.error && (
        <div className="form-error" role="alert">
          Could not read the bill: {p.error}
        </div>
      )}
      {p.usage_error && (
        <div className="form-error" role="alert">
          Could not read the usage report: {p.usage_error}
        </div>
      )}
      {p.tokens.length > 0 && <TokenTotals label={label} tokens={p.tokens} />}
      {p.models.length === 0 ? (
        <p className="muted">No calls logged and nothing billed this day.</p>
      ) : (
        <>
          <h3 className="reconcile-sub">By model</h3>
          <div className="table-wrap">
            <table className="table table-stack" aria-label={`${label}: keyrelay beside the bill, by model`}>
              <thead>
                <tr>
                  <th scope="col">Model</th>
                  <th scope="col" className="num">
                    Calls
                  </th>
                  <th scope="col" className="num">
                    keyrelay
                  </th>
                  <th scope="col" className="num">
                    Billed
                  </th>
                  <th scope="col" className="num">
                    Difference
                  </th>
                  {!p.usage_error && <th scope="col">Tokens (keyrelay / {label})</th>}
                  <th scope="col">Where it comes from</th>
                </tr>
              </thead>
              <tbody>
                {p.models.map((m) => (
                  <tr key={m.model ?? '(none)'}>
                    <td className="stack-title">
                      {m.model ? (
                        <code className="nowrap">{m.model}</code>
                      ) : (
                        <span className="muted">Not tied to a model</span>
                      )}
                    </td>
                    <td className="num" data-label="Calls">
                      {formatNumber(m.keyrelay.requests)}
                    </td>
                    <td className="num nowrap" data-label="keyrelay">
                      <KeyrelayCost k={m.keyrelay} />
                    </td>
                    <td className="num nowrap" data-label="Billed">
                      {p.error ? '—' : formatCost(m.provider.cost_usd)}
                    </td>
                    <td className="num nowrap" data-label="Difference">
                      {p.error ? '—' : signed(m.difference_usd)}
                    </td>
                    {!p.usage_error && (
                      <td data-label="Tokens">
                        {m.tokens.length === 0 || m.model === null ? (
                          <span className="muted small">—</span>
                        ) : (
                          <TokenLines tokens={m.tokens} />
                        )}
                      </td>
                    )}
                    <td data-label="Why">
                      {m.reasons.length === 0 ? (
                        <span className="muted small">{p.error ? '' : 'Agrees'}</span>
                      ) : (
                        <ul className="reconcile-reasons small">
                          {m.reasons.map((r) => (
                            <li key={r}>{r}</li>
                          ))}
                        </ul>
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </>
      )}
      {p.keys.length > 0 && <KeysTable p={p} label={label} onChanged={onChanged} />}
    </section>
  );
}

/**
 * keyrelay's logged cost for a day beside the providers' own bills (the install's owner only): where the
 * numbers differ, by model, and why.
 */
export function ReconcilePage() {
  const { query } = useLocation();
  const asked = query.get('day');
  const day = asked && DAY.test(asked) ? asked : yesterday();
  const result = useAsync(() => api.reconcile(day), [day]);
  const r = result.data;
  const forbidden = (result.error as (Error & { status?: number }) | null)?.status === 403;
  return (
    <>
      <PageHeader
        title="Provider bills"
        description="keyrelay's logged cost and tokens for a day (UTC) beside OpenAI's and Anthropic's own cost and usage reports, by model and API key. Difference = provider − keyrelay."
        actions={
          <label className="reconcile-day">
            <span className="muted small">Day</span>
            <input
              type="date"
              value={day}
              max={today()}
              onChange={(e) => {
                if (DAY.test(e.target.value)) navigate(`/reconcile?day=${e.target.value}`, { replace: true });
              }}
            />
          </label>
        }
      />
      {forbidden ? (
        <EmptyState title="Only this keyrelay's owner sees the providers' bills">
          The comparison covers every account and the provider organization's whole bill.
        </EmptyState>
      ) : result.error ? (
        <ErrorState error={result.error} onRetry={result.reload} />
      ) : !r ? (
        <LoadingState label="Reading the providers' cost reports…" />
      ) : (
        <>
          {!r.final && (
            <p className="muted" role="note">
              The providers' reports for {r.day} may not be final yet: they keep filling in for about a day.
            </p>
          )}
          {r.providers.length === 0 && (
            <EmptyState title="No admin key configured">
              Set OPENAI_ADMIN_KEY and/or ANTHROPIC_ADMIN_KEY (organization admin keys) in keyrelay's
              environment to compare with the providers' bills. They are never stored or shown.
            </EmptyState>
          )}
          {r.providers.map((p) => (
            <ProviderCard key={p.provider} p={p} onChanged={result.reload} />
          ))}
          {r.providers.length > 0 &&
            r.not_configured.map((p) => (
              <p key={p} className="muted small">
                {PROVIDER_LABELS[p] ?? p}: not compared (no {ADMIN_VARIABLES[p] ?? 'admin key'} in the
                environment).
              </p>
            ))}
        </>
      )}
    </>
  );
}

/** On Settings, for the install's owner only (the one who may read the bills): the way to the page. */
export function ProviderBillsSection() {
  const policy = useAsync(() => api.signupPolicy(), []);
  if (!policy.data?.can_change) return null;
  return (
    <section className="card section" aria-labelledby="bills-h">
      <h2 id="bills-h">Provider bills</h2>
      <p className="muted">
        Compare keyrelay's logged cost with OpenAI's and Anthropic's own cost reports, day by day.{' '}
        <Link to="/reconcile">Open the comparison</Link>
      </p>
    </section>
  );
}
