import { useEffect, useState } from 'react';
import {
  api,
  type KeyBudgetStatus,
  type KeyRateStatus,
  type KeyView,
  type MemberLimitsView,
} from '../api.js';
import { useAction } from '../lib/use-action.js';
import { KeyStatusBadge } from '../components/badge.js';
import { CreateKeyDialog, RevokeKeyDialog, RollKeyDialog } from '../components/key-dialogs.js';
import { LimitsDialog } from '../components/limits-dialog.js';
import { PageHeader } from '../components/page-header.js';
import { EmptyState, ErrorState, SkeletonRows } from '../components/states.js';
import { formatDate, formatDateTime, formatRelative } from '../lib/format.js';
import { summarizeLimits } from '../lib/limits.js';
import { BudgetMeter } from '../components/budget-meter.js';
import { RateMeter } from '../components/rate-meter.js';
import { useAsync } from '../lib/use-async.js';
import { navigate, useLocation } from '../router.js';

type Dialog =
  | { kind: 'create' }
  | { kind: 'roll'; key: KeyView }
  | { kind: 'revoke'; key: KeyView }
  | { kind: 'limits'; key: KeyView }
  | null;

function LimitsSummary({
  k,
  budget,
  rate,
}: {
  k: KeyView;
  budget: KeyBudgetStatus | undefined;
  rate: KeyRateStatus | undefined;
}) {
  // With their status known, the budget and rate limits show as meters instead of bare amounts.
  const parts = summarizeLimits({
    ...k,
    ...(budget && { budget_usd: null }),
    ...(rate?.rpm && { rate_limit_rpm: null }),
    ...(rate?.tpm && { rate_limit_tpm: null }),
  });
  if (parts.length === 0 && !budget && !rate)
    return <span className="muted small limits-summary nowrap">No limits</span>;
  // The summary names two models at most; the rest are a hover away.
  const models = k.allowed_models && k.allowed_models.length > 2 ? k.allowed_models.join(', ') : undefined;
  return (
    <span className="limits-summary" title={models && `Models: ${models}`}>
      {parts.map((p, i) => (
        <span key={i} className="limit-part">
          {p}
        </span>
      ))}
      {rate?.rpm && <RateMeter unit="rpm" r={rate.rpm} now={Date.now()} />}
      {rate?.tpm && <RateMeter unit="tpm" r={rate.tpm} now={Date.now()} />}
      {budget && <BudgetMeter k={k} b={budget} now={Date.now()} />}
    </span>
  );
}

function RenameCell({ k, onDone }: { k: KeyView; onDone: () => void }) {
  const [editing, setEditing] = useState(false);
  const [name, setName] = useState(k.name);
  const { busy, error, setError, run } = useAction();

  async function save(): Promise<void> {
    const trimmed = name.trim();
    if (!trimmed) {
      setError('A key needs a name. Type one, or press Escape to keep the old one.');
      return;
    }
    if (trimmed === k.name) {
      setEditing(false);
      setName(k.name);
      return;
    }
    await run(async () => {
      await api.renameKey(k.id, trimmed);
      setEditing(false);
      onDone();
    });
  }

  if (!editing) {
    return (
      <div className="name-cell">
        <span className="key-name">{k.name}</span>
        <button
          type="button"
          className="btn btn-ghost btn-xs"
          aria-label={`Rename ${k.name}`}
          onClick={() => {
            setName(k.name);
            setEditing(true);
          }}
        >
          Rename
        </button>
      </div>
    );
  }
  return (
    <form
      className="rename-form"
      onSubmit={(e) => {
        e.preventDefault();
        void save();
      }}
    >
      <label className="sr-only" htmlFor={`rename-${k.id}`}>
        New name for {k.name}
      </label>
      <input
        id={`rename-${k.id}`}
        value={name}
        maxLength={100}
        autoFocus
        disabled={busy}
        onChange={(e) => {
          setName(e.target.value);
          setError(null);
        }}
        onKeyDown={(e) => {
          if (e.key === 'Escape') {
            e.preventDefault();
            setEditing(false);
            setError(null);
            setName(k.name);
          }
        }}
      />
      <button type="submit" className="btn btn-primary btn-xs" disabled={busy}>
        Save
      </button>
      <button
        type="button"
        className="btn btn-ghost btn-xs"
        onClick={() => {
          setEditing(false);
          setError(null);
        }}
      >
        Cancel
      </button>
      {error && (
        <span className="form-error small" role="alert">
          {error}
        </span>
      )}
    </form>
  );
}

/** Keys are read again this often while the page is visible, so "Last used" and budgets stay current. */
const KEYS_REFRESH_MS = 10_000;
const SHOW_REVOKED_KEY = 'keyrelay.keys.showRevoked';

/**
 * Rolled keys, by id: the old key of a roll (active, expiring, beside an active key of the same name that
 * outlives it) and that key, so the two rows read "old" and "new" instead of one name twice.
 */
function rollPairs(keys: KeyView[]): Map<string, 'old' | 'new'> {
  const roles = new Map<string, 'old' | 'new'>();
  for (const k of keys) {
    if (k.status !== 'active' || !k.expires_at) continue;
    // A roll's new key outlives the old one (it has no expiry, or a later one); created_at can tie.
    const successor = keys
      .filter(
        (n) =>
          n.id !== k.id &&
          n.status === 'active' &&
          n.name === k.name &&
          (n.expires_at === null || n.expires_at > k.expires_at!),
      )
      .sort((a, b) => b.created_at.localeCompare(a.created_at))[0];
    if (!successor) continue;
    roles.set(k.id, 'old');
    if (!roles.has(successor.id)) roles.set(successor.id, 'new');
  }
  return roles;
}

/** The limits an admin set on the caller across all their keys here, with their budget's spend. */
function MemberLimitsNote({ view }: { view: MemberLimitsView }) {
  const rpm = view.limits.rate_limit_rpm;
  return (
    <section
      className="card section member-limits-note"
      aria-label="Your limits across your keys"
      data-testid="member-limits"
    >
      <p className="small">
        <strong>Your limits across all your keys here</strong>{' '}
        <span className="muted">(set by an admin; each key&rsquo;s own limits apply too)</span>
      </p>
      {rpm !== null && <p className="small">{rpm.toLocaleString('en-US')} requests per minute</p>}
      {view.budget && <BudgetMeter k={view.limits} b={view.budget} now={Date.now()} />}
    </section>
  );
}

export function KeysPage() {
  const keys = useAsync(() => api.listKeys(), []);
  const { query } = useLocation();
  const [dialog, setDialog] = useState<Dialog>(null);
  const [showRevoked, setShowRevoked] = useState(() => localStorage.getItem(SHOW_REVOKED_KEY) !== '0');
  const reloadKeys = keys.reload;
  useEffect(() => {
    const t = setInterval(() => {
      if (document.visibilityState === 'visible') reloadKeys();
    }, KEYS_REFRESH_MS);
    return () => clearInterval(t);
  }, [reloadKeys]);

  // Deep links from the overview: /keys?create=1 and /keys?roll=<id>.
  useEffect(() => {
    if (!keys.data) return;
    const roll = query.get('roll');
    const target = roll ? keys.data.keys.find((k) => k.id === roll && k.status === 'active') : undefined;
    if (target) setDialog({ kind: 'roll', key: target });
    else if (query.get('create')) setDialog({ kind: 'create' });
    if (roll || query.get('create')) navigate('/keys', { replace: true });
  }, [keys.data, query]);

  const all = keys.data?.keys ?? [];
  const revokedCount = all.filter((k) => k.status === 'revoked').length;
  const list = showRevoked ? all : all.filter((k) => k.status !== 'revoked');
  const rolls = rollPairs(all);
  return (
    <>
      <PageHeader
        title="Keys"
        description="Each key gets its own request log, usage and controls. Send it as the proxy-api-key header."
        actions={
          <button type="button" className="btn btn-primary" onClick={() => setDialog({ kind: 'create' })}>
            Create key
          </button>
        }
      />
      {keys.data?.member && <MemberLimitsNote view={keys.data.member} />}
      {keys.error ? (
        <ErrorState error={keys.error} onRetry={keys.reload} />
      ) : keys.data && all.length === 0 ? (
        <EmptyState
          title="No keys yet"
          action={
            <button type="button" className="btn btn-primary" onClick={() => setDialog({ kind: 'create' })}>
              Create your first key
            </button>
          }
        >
          Create a key, then send it in the <code>proxy-api-key</code> header.
        </EmptyState>
      ) : (
        <>
          {revokedCount > 0 && (
            <label className="keys-toggle small">
              <input
                type="checkbox"
                checked={showRevoked}
                onChange={(e) => {
                  setShowRevoked(e.target.checked);
                  localStorage.setItem(SHOW_REVOKED_KEY, e.target.checked ? '1' : '0');
                }}
              />{' '}
              Show revoked keys ({revokedCount})
            </label>
          )}
          <div className="table-wrap card keys-wrap">
            <table className="table table-stack keys-table">
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Limits</th>
                  <th scope="col">Status</th>
                  <th scope="col">Last used</th>
                  <th scope="col">
                    <span className="sr-only">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {!keys.data ? (
                  <SkeletonRows cols={5} rows={3} />
                ) : (
                  list.map((k) => (
                    <tr key={k.id} data-key-id={k.id}>
                      <td className="stack-title name-col">
                        {k.status === 'active' ? (
                          <RenameCell k={k} onDone={keys.reload} />
                        ) : (
                          <div className="name-cell">
                            <span className="key-name">{k.name}</span>
                          </div>
                        )}
                        <code className="key-hint">{k.hint}</code>
                        {k.service && (
                          <span className="service-tag" title="The organization’s key, held by no member">
                            service key
                          </span>
                        )}
                        {rolls.get(k.id) && (
                          <span className={`roll-tag roll-${rolls.get(k.id)}`}>
                            {rolls.get(k.id) === 'old' ? 'old key, being replaced' : 'new key'}
                          </span>
                        )}
                      </td>
                      <td data-label="Limits" className="limits-cell">
                        <LimitsSummary
                          k={k}
                          budget={keys.data?.budgets[k.id]}
                          rate={keys.data?.rates?.[k.id]}
                        />
                      </td>
                      <td data-label="Status">
                        <span className="status-cell">
                          <KeyStatusBadge status={k.status} />
                          {k.status === 'active' && k.expires_at && (
                            <span className="muted small" title={formatDateTime(k.expires_at)}>
                              expires {formatRelative(k.expires_at)}
                            </span>
                          )}
                        </span>
                      </td>
                      <td data-label="Last used" className="used-cell">
                        <span title={k.last_used_at ? formatDateTime(k.last_used_at) : undefined}>
                          {formatRelative(k.last_used_at)}
                        </span>
                        <span className="muted small nowrap" title={formatDateTime(k.created_at)}>
                          created {formatDate(k.created_at)}
                        </span>
                      </td>
                      <td className="actions-cell">
                        {k.status === 'active' && (
                          <div className="row-actions">
                            <button
                              type="button"
                              className="btn btn-secondary btn-xs"
                              aria-label={`Limits for ${k.name}`}
                              onClick={() => setDialog({ kind: 'limits', key: k })}
                            >
                              Limits
                            </button>
                            {rolls.get(k.id) !== 'old' && (
                              <button
                                type="button"
                                className="btn btn-secondary btn-xs"
                                aria-label={`Roll ${k.name}`}
                                onClick={() => setDialog({ kind: 'roll', key: k })}
                              >
                                Roll
                              </button>
                            )}
                            <button
                              type="button"
                              className="btn btn-danger-ghost btn-xs"
                              aria-label={`Revoke ${k.name}`}
                              onClick={() => setDialog({ kind: 'revoke', key: k })}
                            >
                              Revoke
                            </button>
                          </div>
                        )}
                      </td>
                    </tr>
                  ))
                )}
              </tbody>
            </table>
          </div>
        </>
      )}
      <CreateKeyDialog
        open={dialog?.kind === 'create'}
        onClose={() => setDialog(null)}
        onCreated={keys.reload}
      />
      <RollKeyDialog
        keyView={dialog?.kind === 'roll' ? dialog.key : null}
        onClose={() => setDialog(null)}
        onRolled={keys.reload}
      />
      <LimitsDialog
        keyView={dialog?.kind === 'limits' ? dialog.key : null}
        budget={dialog?.kind === 'limits' ? keys.data?.budgets[dialog.key.id] : undefined}
        rate={dialog?.kind === 'limits' ? keys.data?.rates?.[dialog.key.id] : undefined}
        onClose={() => setDialog(null)}
        onSaved={keys.reload}
      />
      <RevokeKeyDialog
        keyView={dialog?.kind === 'revoke' ? dialog.key : null}
        onClose={() => setDialog(null)}
        onRevoked={keys.reload}
      />
    </>
  );
}
