import { api } from '../api.js';
import { KeyStatusBadge } from '../components/badge.js';
import { KeyReveal } from '../components/key-reveal.js';
import { PageHeader } from '../components/page-header.js';
import { Quickstart } from '../components/quickstart.js';
import { ErrorState } from '../components/states.js';
import { formatCompact, formatCost, formatRelative } from '../lib/format.js';
import { useAsync } from '../lib/use-async.js';
import { Link } from '../router.js';
import { useSession } from '../session.js';

const DAY_MS = 24 * 3600 * 1000;

function LastDayStats() {
  const stats = useAsync(async () => {
    const to = new Date();
    const from = new Date(to.getTime() - DAY_MS);
    const { points } = await api.usageSeries({
      bucket: 'hour',
      from: from.toISOString(),
      to: to.toISOString(),
    });
    let requests = 0;
    let errors = 0;
    let tokens = 0;
    let cost = 0;
    let unknown = 0;
    let partial = 0;
    for (const p of points) {
      requests += p.requests;
      errors += p.errors;
      tokens += p.input_tokens + p.output_tokens;
      cost += p.cost_usd;
      unknown += p.unknown_cost_requests;
      partial += p.partial_cost_requests;
    }
    return { requests, errors, tokens, cost, unknown, partial };
  }, []);
  const s = stats.data;
  const items = [
    { label: 'Requests', value: s ? formatCompact(s.requests) : '' },
    { label: 'Errors', value: s ? formatCompact(s.errors) : '' },
    { label: 'Tokens', value: s ? formatCompact(s.tokens) : '' },
    {
      label: 'Cost',
      value: s ? (s.requests > 0 && s.unknown === s.requests ? 'unpriced' : formatCost(s.cost)) : '',
      note:
        s && ((s.unknown > 0 && s.unknown < s.requests) || s.partial > 0)
          ? [
              s.unknown > 0 && s.unknown < s.requests ? `+ ${s.unknown} unpriced` : '',
              s.partial > 0 ? `${s.partial} partial` : '',
            ]
              .filter(Boolean)
              .join(' · ')
          : undefined,
    },
  ];
  if (stats.error) return <ErrorState error={stats.error} onRetry={stats.reload} />;
  return (
    <section aria-labelledby="last-day" className="section">
      <div className="section-head">
        <h2 id="last-day">Last 24 hours</h2>
        <Link to="/usage">View usage →</Link>
      </div>
      <div className="stat-grid">
        {items.map((i) => (
          <div key={i.label} className="card stat">
            <span className="stat-label">{i.label}</span>
            <span className="stat-value">{s ? i.value : <span className="skeleton skeleton-lg" />}</span>
            {i.note && <span className="stat-note">{i.note}</span>}
          </div>
        ))}
      </div>
    </section>
  );
}

function DefaultKeyCard() {
  const { revealedKey, forgetRevealedKey } = useSession();
  const keys = useAsync(() => api.listKeys(), []);
  if (revealedKey) {
    return (
      <section className="card card-accent section" aria-labelledby="key-title">
        <div className="section-head">
          <h2 id="key-title">Your {revealedKey.name} key</h2>
          <button type="button" className="btn btn-ghost btn-sm" onClick={forgetRevealedKey}>
            I've saved it
          </button>
        </div>
        <p className="muted">
          Send it in the <code>proxy-api-key</code> header with every request. Your provider key stays where
          it is.
        </p>
        <KeyReveal value={revealedKey.key} label="Your default key" />
      </section>
    );
  }
  const list = keys.data?.keys ?? [];
  const active = list.filter((k) => k.status === 'active');
  const main = active.find((k) => k.name === 'default') ?? active[0] ?? list[0];
  return (
    <section className="card section" aria-labelledby="key-title">
      <div className="section-head">
        <h2 id="key-title">Your key</h2>
        <Link to="/keys">Manage keys →</Link>
      </div>
      {keys.error ? (
        <ErrorState error={keys.error} onRetry={keys.reload} />
      ) : !keys.data ? (
        <span className="skeleton skeleton-lg" />
      ) : main ? (
        <div className="key-summary">
          <div className="key-summary-main">
            <code className="key-hint">{main.hint}</code>
            <span className="muted small">
              {main.name} · last used {formatRelative(main.last_used_at)}
            </span>
            <KeyStatusBadge status={main.status} />
          </div>
          {main.status === 'active' ? (
            <p className="muted small">
              Full keys are shown only once, when created. Lost it?{' '}
              <Link to={`/keys?roll=${encodeURIComponent(main.id)}`}>Roll this key</Link> to get a new one.
            </p>
          ) : (
            <p className="muted small">
              This key no longer works. <Link to="/keys?create=1">Create a new key</Link> to keep making
              calls.
            </p>
          )}
        </div>
      ) : (
        <p className="muted">
          You have no keys yet. <Link to="/keys?create=1">Create one</Link> to start.
        </p>
      )}
    </section>
  );
}

export function OverviewPage() {
  const { info, account, revealedKey } = useSession();
  return (
    <>
      <PageHeader title="Overview" description={`Signed in as ${account.email}`} />
      <DefaultKeyCard />
      <section className="card section" aria-labelledby="qs-title">
        <div className="section-head">
          <h2 id="qs-title">Quickstart</h2>
        </div>
        <p className="muted">
          Change two things in your existing code: the base URL, and one extra header. Requests show up in{' '}
          <Link to="/requests">Requests</Link> as they happen.
        </p>
        <Quickstart publicUrl={info.public_url} fullKey={revealedKey?.key ?? null} />
      </section>
      <LastDayStats />
    </>
  );
}
