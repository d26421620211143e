import { useState, type FormEvent } from 'react';
import { api, type ApiTokenView } from '../api.js';
import { formatDateTime } from '../lib/format.js';
import { useAction } from '../lib/use-action.js';
import { useAsync } from '../lib/use-async.js';
import { CopyButton } from './copy-button.js';

const SCOPES = [
  { id: 'usage', label: 'Usage', help: 'usage series and breakdowns, credentials' },
  { id: 'requests', label: 'Requests', help: 'the request log and single requests' },
  { id: 'export', label: 'Export', help: 'the log as CSV or NDJSON' },
] as const;

/**
 * Read-only API tokens for scripts and BI tools: made here (the token shown once), revoked here. The read
 * API they use is described at /api/console/openapi.json.
 */
export function ApiTokens() {
  const list = useAsync(() => api.listApiTokens(), []);
  const [name, setName] = useState('');
  const [scopes, setScopes] = useState<string[]>(['usage']);
  const [secret, setSecret] = useState<string | null>(null);
  const create = useAction();
  const revoke = useAction();

  async function submit(e: FormEvent): Promise<void> {
    e.preventDefault();
    if (!name.trim()) {
      create.setError('Give the token a name, e.g. the script that uses it.');
      return;
    }
    await create.run(async () => {
      const made = await api.createApiToken(name.trim(), scopes);
      setSecret(made.secret);
      setName('');
      list.reload();
    });
  }

  return (
    <>
      {secret && (
        <div className="key-reveal">
          <div className="key-reveal-row">
            <code className="key-value" aria-label="Your new API token">
              {secret}
            </code>
            <CopyButton text={secret} label="Copy token" />
          </div>
          <p className="key-reveal-note">
            <strong>Copy it now — you won't see this token again.</strong> Send it as{' '}
            <code>Authorization: Bearer …</code>; it only reads.
          </p>
        </div>
      )}
      <form className="token-form" onSubmit={(e) => void submit(e)}>
        <div className="field">
          <label htmlFor="token-name">Name</label>
          <input
            id="token-name"
            value={name}
            maxLength={100}
            placeholder="e.g. weekly spend report"
            onChange={(e) => {
              setName(e.target.value);
              create.setError(null);
            }}
          />
        </div>
        <fieldset className="token-scopes">
          <legend>May read</legend>
          {SCOPES.map((s) => (
            <label key={s.id} title={s.help}>
              <input
                type="checkbox"
                checked={scopes.includes(s.id)}
                onChange={(e) =>
                  setScopes((x) => (e.target.checked ? [...x, s.id] : x.filter((y) => y !== s.id)))
                }
              />{' '}
              {s.label}
            </label>
          ))}
        </fieldset>
        <button type="submit" className="btn btn-primary" disabled={create.busy || scopes.length === 0}>
          Create token
        </button>
        {create.error && (
          <span className="form-error small" role="alert">
            {create.error}
          </span>
        )}
      </form>
      {list.data && list.data.tokens.length > 0 && (
        <div className="table-wrap">
          <table className="table table-compact table-stack" aria-label="API tokens">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Token</th>
                <th scope="col">May read</th>
                <th scope="col">Created</th>
                <th scope="col">
                  <span className="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {list.data.tokens.map((t: ApiTokenView) => (
                <tr key={t.id}>
                  <td className="stack-title">{t.name}</td>
                  <td data-label="Token">
                    <code>{t.hint}</code>
                  </td>
                  <td data-label="May read">{t.scopes.join(', ')}</td>
                  <td data-label="Created">{formatDateTime(t.created_at)}</td>
                  <td>
                    {t.revoked_at ? (
                      <span className="muted small">Revoked</span>
                    ) : (
                      <button
                        type="button"
                        className="btn btn-ghost btn-xs"
                        disabled={revoke.busy}
                        aria-label={`Revoke ${t.name}`}
                        onClick={() =>
                          void revoke.run(async () => {
                            await api.revokeApiToken(t.id);
                            list.reload();
                          })
                        }
                      >
                        Revoke
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <p className="muted small">
        The read API is described in <a href="/api/console/openapi.json">its OpenAPI document</a>.
      </p>
    </>
  );
}
