import { useEffect, useState } from 'react';
import { api, type KeyView } from '../api.js';
import { useAction } from '../lib/use-action.js';
import { KeyStatusBadge } from '../components/badge.js';
import { CreateKeyDialog, RevokeKeyDialog, RollKeyDialog } from '../components/key-dialogs.js';
import { LimitsDialog } from '../components/limits-dialog.js';
import { PageHeader } from '../components/page-header.js';
import { EmptyState, ErrorState, SkeletonRows } from '../components/states.js';
import { formatDate, formatDateTime, formatRelative } from '../lib/format.js';
import { summarizeLimits } from '../lib/limits.js';
import { useAsync } from '../lib/use-async.js';
import { navigate, useLocation } from '../router.js';

type Dialog =
  | { kind: 'create' }
  | { kind: 'roll'; key: KeyView }
  | { kind: 'revoke'; key: KeyView }
  | { kind: 'limits'; key: KeyView }
  | null;

function LimitsSummary({ k }: { k: KeyView }) {
  const parts = summarizeLimits(k);
  if (parts.length === 0) return <span className="muted small limits-summary">No limits</span>;
  // The summary names two models at most; the rest are a hover away.
  const models = k.allowed_models && k.allowed_models.length > 2 ? k.allowed_models.join(', ') : undefined;
  return (
    <span className="limits-summary" title={models && `Models: ${models}`}>
      {parts.map((p, i) => (
        <span key={i} className="limit-part">
          {p}
        </span>
      ))}
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

export function KeysPage() {
  const keys = useAsync(() => api.listKeys(), []);
  const { query } = useLocation();
  const [dialog, setDialog] = useState<Dialog>(null);

  // Deep links from the overview: /keys?create=1 and /keys?roll=<id>.
  useEffect(() => {
    if (!keys.data) return;
    const roll = query.get('roll');
    const target = roll ? keys.data.keys.find((k) => k.id === roll && k.status === 'active') : undefined;
    if (target) setDialog({ kind: 'roll', key: target });
    else if (query.get('create')) setDialog({ kind: 'create' });
    if (roll || query.get('create')) navigate('/keys', { replace: true });
  }, [keys.data, query]);

  const list = keys.data?.keys ?? [];
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
      {keys.error ? (
        <ErrorState error={keys.error} onRetry={keys.reload} />
      ) : keys.data && list.length === 0 ? (
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
                        <span className="key-name">{k.name}</span>
                      )}
                      <code className="key-hint">{k.hint}</code>
                    </td>
                    <td data-label="Limits" className="limits-cell">
                      <LimitsSummary k={k} />
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
                          <button
                            type="button"
                            className="btn btn-secondary btn-xs"
                            aria-label={`Roll ${k.name}`}
                            onClick={() => setDialog({ kind: 'roll', key: k })}
                          >
                            Roll
                          </button>
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
