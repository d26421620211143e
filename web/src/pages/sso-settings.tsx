/**
 * An organization's single sign-on, for its owners (docs/teams.md, "Single sign-on"): the identity provider's
 * issuer, client id and secret, the email domains it signs in, the role a first sign-in gives, and whether
 * password sign-in is off for members. The secret is write-only: the page never has it to show.
 */
import { useState, type FormEvent } from 'react';
import { api, type OrgRole, type OrgView, type SsoView } from '../api.js';
import { CopyButton } from '../components/copy-button.js';
import { ErrorState, LoadingState } from '../components/states.js';
import { useAction } from '../lib/use-action.js';
import { useAsync } from '../lib/use-async.js';

type SsoRole = Exclude<OrgRole, 'owner'>;

function SsoForm({
  org,
  sso,
  onSaved,
}: {
  org: OrgView;
  sso: SsoView | null;
  onSaved: (message: string) => void;
}) {
  const [issuer, setIssuer] = useState(sso?.issuer ?? '');
  const [clientId, setClientId] = useState(sso?.client_id ?? '');
  const [secret, setSecret] = useState('');
  const [domains, setDomains] = useState(sso?.domains.join(', ') ?? '');
  const [role, setRole] = useState<SsoRole>(sso?.default_role ?? 'member');
  const [ssoOnly, setSsoOnly] = useState(sso?.sso_only ?? false);
  const { busy, error, run } = useAction();

  async function save(e: FormEvent): Promise<void> {
    e.preventDefault();
    await run(async () => {
      await api.putSso(org.id, {
        issuer,
        client_id: clientId,
        ...(secret ? { client_secret: secret } : {}),
        domains: domains.split(/[\s,]+/).filter(Boolean),
        default_role: role,
        sso_only: ssoOnly,
      });
      setSecret('');
      onSaved('Single sign-on saved.');
    });
  }

  async function turnOff(): Promise<void> {
    await run(async () => {
      await api.deleteSso(org.id);
      onSaved('Single sign-on is off.');
    });
  }

  return (
    <form className="form" onSubmit={(e) => void save(e)}>
      <div className="field">
        <label htmlFor="sso-issuer">Issuer URL</label>
        <input
          id="sso-issuer"
          type="url"
          required
          placeholder="https://login.example.com"
          value={issuer}
          onChange={(e) => setIssuer(e.target.value)}
        />
      </div>
      <div className="field">
        <label htmlFor="sso-client-id">Client ID</label>
        <input id="sso-client-id" required value={clientId} onChange={(e) => setClientId(e.target.value)} />
      </div>
      <div className="field">
        <label htmlFor="sso-secret">Client secret</label>
        <input
          id="sso-secret"
          type="password"
          autoComplete="off"
          required={!sso?.client_secret_set}
          placeholder={sso?.client_secret_set ? 'Stored — leave empty to keep it' : ''}
          value={secret}
          onChange={(e) => setSecret(e.target.value)}
        />
      </div>
      <div className="field">
        <label htmlFor="sso-domains">Email domains</label>
        <input
          id="sso-domains"
          required
          placeholder="example.com, example.org"
          value={domains}
          onChange={(e) => setDomains(e.target.value)}
        />
        <span className="hint">
          People with these addresses sign in here, and join at their first sign-in.
        </span>
      </div>
      <div className="field">
        <label htmlFor="sso-role">Role at first sign-in</label>
        <select id="sso-role" value={role} onChange={(e) => setRole(e.target.value as SsoRole)}>
          <option value="admin">Admin</option>
          <option value="member">Member</option>
          <option value="viewer">Viewer</option>
        </select>
      </div>
      <label className="sso-check">
        <input type="checkbox" checked={ssoOnly} onChange={(e) => setSsoOnly(e.target.checked)} />
        <span>SSO only: members cannot sign in with a password (owners still can)</span>
      </label>
      {error && (
        <div className="form-error" role="alert">
          {error}
        </div>
      )}
      <div className="row-actions">
        <button type="submit" className="btn btn-primary" disabled={busy}>
          {busy ? 'Saving…' : 'Save single sign-on'}
        </button>
        {sso && (
          <button
            type="button"
            className="btn btn-danger-ghost"
            disabled={busy}
            onClick={() => void turnOff()}
          >
            Turn off
          </button>
        )}
      </div>
    </form>
  );
}

export function SsoSettings({ org }: { org: OrgView }) {
  const state = useAsync(() => api.getSso(org.id), [org.id]);
  const [notice, setNotice] = useState<string | null>(null);
  return (
    <section className="card section sso-settings" aria-labelledby="sso-h">
      <h2 id="sso-h">Single sign-on</h2>
      <p className="muted">
        Sign in through your identity provider with OpenID Connect. Register this redirect URI with it:
      </p>
      {state.error ? (
        <ErrorState error={state.error} onRetry={state.reload} />
      ) : !state.data ? (
        <LoadingState />
      ) : (
        <>
          <div className="key-reveal-row">
            <code className="key-value" data-testid="sso-redirect-uri">
              {state.data.redirect_uri}
            </code>
            <CopyButton text={state.data.redirect_uri} label="Copy" />
          </div>
          {notice && (
            <div className="callout small" role="status">
              {notice}
            </div>
          )}
          {/* A new form for each stored state, so its fields start from what is stored. */}
          <SsoForm
            key={state.data.sso?.updated_at ?? 'off'}
            org={org}
            sso={state.data.sso}
            onSaved={(message) => {
              setNotice(message);
              state.reload();
            }}
          />
        </>
      )}
    </section>
  );
}
