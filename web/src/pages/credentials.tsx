import { useState } from 'react';
import { api, type CredentialView } from '../api.js';
import { PageHeader } from '../components/page-header.js';
import { EmptyState, ErrorState, SkeletonRows } from '../components/states.js';
import { Tabs } from '../components/tabs.js';
import { formatCompact, formatCost, formatNumber, formatRelative } from '../lib/format.js';
import { useAction } from '../lib/use-action.js';
import { useAsync } from '../lib/use-async.js';
import { navigate, useLocation } from '../router.js';

const RANGES: Record<string, { label: string; days: number }> = {
  '1d': { label: '24h', days: 1 },
  '7d': { label: '7d', days: 7 },
  '30d': { label: '30d', days: 30 },
};

const LIMIT_NAMES: Record<string, string> = {
  requests: 'Requests',
  tokens: 'Tokens',
  input_tokens: 'Input tokens',
  output_tokens: 'Output tokens',
};

function LabelCell({ c, onDone }: { c: CredentialView; onDone: () => void }) {
  const [editing, setEditing] = useState(false);
  const [label, setLabel] = useState(c.label ?? '');
  const { busy, error, setError, run } = useAction();
  const save = (value: string | null) =>
    run(async () => {
      await api.setCredentialLabel(c.fingerprint, value);
      setEditing(false);
      onDone();
    });
  if (!editing) {
    return (
      <div className="name-cell">
        {c.label ? <span className="key-name">{c.label}</span> : <span className="muted">No label</span>}
        <button
          type="button"
          className="btn btn-ghost btn-xs"
          aria-label={`Label credential ${c.fingerprint.slice(0, 12)}`}
          onClick={() => {
            setLabel(c.label ?? '');
            setEditing(true);
          }}
        >
          {c.label ? 'Rename' : 'Add label'}
        </button>
      </div>
    );
  }
  return (
    <form
      className="rename-form"
      onSubmit={(e) => {
        e.preventDefault();
        void save(label.trim() || null);
      }}
    >
      <label className="sr-only" htmlFor={`label-${c.fingerprint}`}>
        Label for credential {c.fingerprint.slice(0, 12)}
      </label>
      <input
        id={`label-${c.fingerprint}`}
        value={label}
        maxLength={100}
        autoFocus
        disabled={busy}
        placeholder="e.g. prod OpenAI key"
        onChange={(e) => {
          setLabel(e.target.value);
          setError(null);
        }}
        onKeyDown={(e) => {
          if (e.key === 'Escape') {
            e.preventDefault();
            setEditing(false);
            setError(null);
          }
        }}
      />
      <button type="submit" className="btn btn-primary btn-xs" disabled={busy}>
        Save
      </button>
      {error && (
        <span className="form-error small" role="alert">
          {error}
        </span>
      )}
    </form>
  );
}

function Headroom({ h }: { h: CredentialView['headroom'] }) {
  if (!h) return <span className="muted small">Not reported</span>;
  return (
    <div className="headroom" title={`Reported ${new Date(h.seen_at).toLocaleString()}`}>
      {h.limits.map((l) => (
        <div key={l.name} className="headroom-line">
          <span className="muted">{LIMIT_NAMES[l.name] ?? l.name}</span>{' '}
          <strong>{l.remaining === null ? '?' : formatNumber(l.remaining)}</strong>
          {l.limit !== null && <span className="muted"> / {formatNumber(l.limit)} left</span>}
          {l.reset && <span className="muted small"> · resets {l.reset}</span>}
        </div>
      ))}
      <span className="muted small">{formatRelative(h.seen_at)}</span>
    </div>
  );
}

/**
 * The provider credentials sent through keyrelay, by their keyed fingerprint (keyrelay never stores the
 * credential): a label the owner gives each, spend and requests over the range, and the rate-limit headroom
 * the provider reported last.
 */
export function CredentialsPage() {
  const { query, search } = useLocation();
  const rangeId = query.get('range') && query.get('range')! in RANGES ? query.get('range')! : '30d';
  const list = useAsync(() => {
    const to = new Date();
    const from = new Date(to.getTime() - RANGES[rangeId]!.days * 86_400_000);
    return api.listCredentials({ from: from.toISOString(), to: to.toISOString() });
  }, [search]);
  const rows = list.data?.credentials;
  return (
    <>
      <PageHeader
        title="Provider credentials"
        description="The OpenAI and Anthropic keys your callers send, known by a keyed fingerprint only: what each spent, and the headroom its provider reported last."
        actions={
          <Tabs
            idPrefix="cred-range"
            size="sm"
            label="Time range"
            value={rangeId}
            onChange={(id) => navigate(`/credentials?range=${id}`, { replace: true })}
            items={Object.entries(RANGES).map(([id, r]) => ({ id, label: r.label }))}
          />
        }
      />
      {list.error ? (
        <ErrorState error={list.error} onRetry={list.reload} />
      ) : rows && rows.length === 0 ? (
        <EmptyState title="No provider credentials in this range">
          Requests through keyrelay show here under the fingerprint of the key they carried.
        </EmptyState>
      ) : (
        <div className="table-wrap card">
          <table className="table table-stack credentials-table" aria-label="Provider credentials">
            <thead>
              <tr>
                <th scope="col">Label</th>
                <th scope="col">Fingerprint</th>
                <th scope="col" className="num">
                  Requests
                </th>
                <th scope="col" className="num">
                  Tokens in / out
                </th>
                <th scope="col" className="num">
                  Cost
                </th>
                <th scope="col">Rate-limit headroom</th>
              </tr>
            </thead>
            <tbody>
              {!rows ? (
                <SkeletonRows cols={6} />
              ) : (
                rows.map((c) => (
                  <tr key={c.fingerprint}>
                    <td className="stack-title">
                      <LabelCell c={c} onDone={list.reload} />
                    </td>
                    <td data-label="Fingerprint">
                      <code title={c.fingerprint}>{c.fingerprint.slice(0, 12)}…</code>
                    </td>
                    <td className="num" data-label="Requests">
                      {formatNumber(c.requests)}
                    </td>
                    <td className="num nowrap" data-label="Tokens in / out">
                      {formatCompact(c.input_tokens)} / {formatCompact(c.output_tokens)}
                    </td>
                    <td className="num nowrap" data-label="Cost">
                      {c.unknown_cost_requests === c.requests ? (
                        <span className="muted">unpriced</span>
                      ) : (
                        formatCost(c.cost_usd)
                      )}
                    </td>
                    <td data-label="Headroom">
                      <Headroom h={c.headroom} />
                    </td>
                  </tr>
                ))
              )}
            </tbody>
          </table>
        </div>
      )}
    </>
  );
}
