/**
 * An invitation link, /invite#<token> (the token stays out of server logs and Referer headers). Signed out:
 * what the invitation is for, and sign in or sign up (the token waits in this tab's session storage). Signed
 * in: join, and see the organization's default key once.
 */
import { useEffect, useState } from 'react';
import { api, INVITE_STORAGE, setCurrentOrg, type CreatedKey, type OrgView } from '../api.js';
import { KeyReveal } from '../components/key-reveal.js';
import { Logo } from '../components/shell.js';
import { ErrorState, LoadingState } from '../components/states.js';
import { formatRelative } from '../lib/format.js';
import { useAction } from '../lib/use-action.js';
import { useAsync } from '../lib/use-async.js';
import { navigate } from '../router.js';

function inviteToken(): string {
  const fromHash = window.location.hash.slice(1);
  if (fromHash) window.sessionStorage.setItem(INVITE_STORAGE, fromHash);
  return fromHash || (window.sessionStorage.getItem(INVITE_STORAGE) ?? '');
}

export function InvitePage({ signedIn }: { signedIn: boolean }) {
  const [token] = useState(inviteToken);
  const preview = useAsync(() => api.previewInvite(token), [token]);
  const [joined, setJoined] = useState<{ org: OrgView; key: CreatedKey | null } | null>(null);
  const { busy, error, run } = useAction();
  useEffect(() => {
    // Out of the address bar (and history) once read.
    if (window.location.hash) window.history.replaceState(null, '', '/invite');
  }, []);

  let body;
  if (joined) {
    body = (
      <>
        <h1>You joined {joined.org.name}</h1>
        {joined.key && <KeyReveal value={joined.key.key} label={`Your key in ${joined.org.name}`} />}
        <button
          type="button"
          className="btn btn-primary"
          onClick={() => {
            setCurrentOrg(joined.org.id);
            window.location.assign('/keys');
          }}
        >
          Open {joined.org.name}
        </button>
      </>
    );
  } else if (preview.error) {
    body = <ErrorState error={preview.error} />;
  } else if (!preview.data) {
    body = <LoadingState />;
  } else {
    const p = preview.data;
    body = (
      <>
        <h1>Join {p.org.name}</h1>
        <p className="muted">
          You are invited as {p.role === 'admin' || p.role === 'owner' ? 'an' : 'a'} {p.role}. The link
          expires {formatRelative(p.expires_at)}.
        </p>
        {error && (
          <div className="form-error" role="alert">
            {error}
          </div>
        )}
        {signedIn ? (
          <button
            type="button"
            className="btn btn-primary"
            disabled={busy}
            onClick={() =>
              void run(async () => {
                const r = await api.acceptInvite(token);
                window.sessionStorage.removeItem(INVITE_STORAGE);
                setJoined(r);
              })
            }
          >
            {busy ? 'Joining…' : `Join ${p.org.name}`}
          </button>
        ) : (
          <div className="invite-actions">
            <button
              type="button"
              className="btn btn-primary"
              onClick={() => navigate('/signup?next=/invite')}
            >
              Sign up to join
            </button>
            <button
              type="button"
              className="btn btn-secondary"
              onClick={() => navigate('/login?next=/invite')}
            >
              I have an account
            </button>
          </div>
        )}
      </>
    );
  }
  return (
    <div className={signedIn ? 'invite-page' : 'auth-wrap'}>
      <div className="card auth-card invite-card">
        {!signedIn && <Logo />}
        {body}
      </div>
    </div>
  );
}
