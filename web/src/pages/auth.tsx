import { useState, type FormEvent } from 'react';
import { ApiError, api, type Account, type CreatedKey, type Info, type SignupNotice } from '../api.js';
import { Logo } from '../components/shell.js';
import { formatWait } from '../lib/format.js';
import { Link } from '../router.js';

export function AuthPage({
  mode,
  info,
  onSignedIn,
}: {
  mode: 'login' | 'signup';
  info: Info;
  onSignedIn: (account: Account, key: CreatedKey | null, notices: SignupNotice[]) => void;
}) {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  // 'invite' still lets the very first account sign up here (bootstrap); the server refuses the rest.
  const signupOpen = info.signup !== 'closed';
  const showSignup = mode === 'signup' && signupOpen;

  async function submit(e: FormEvent): Promise<void> {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      if (showSignup) await api.signup(email, password);
      // Sign-up opens no session: signing in is the same step for a new account and an old one. The default
      // key comes with the first sign-in, whichever page that happens on.
      const r = await api.login(email, password);
      onSignedIn(r.account, r.key, r.notices ?? []);
    } catch (err) {
      // Sign-up took the address but its password does not sign in: the address already has an account.
      setError(
        showSignup && err instanceof ApiError && err.code === 'invalid_credentials'
          ? 'This email address already has an account with another password. Log in instead.'
          : describe(err),
      );
      setBusy(false);
    }
  }

  return (
    <div className="auth-wrap">
      <div className="auth-card card">
        <div className="auth-logo">
          <Logo />
        </div>
        <h1>{showSignup ? 'Create your account' : 'Log in to keyrelay'}</h1>
        <p className="muted">
          {showSignup
            ? 'You get a default key right away, ready to paste into your code.'
            : 'Logs, usage and keys for your OpenAI and Anthropic traffic.'}
        </p>
        {showSignup && info.signup === 'invite' && (
          <div className="callout small" role="note">
            This server is invitation-only. Sign-up here works only for the first account.
          </div>
        )}
        {mode === 'signup' && !signupOpen ? (
          <div className="callout" role="status">
            Sign-up is closed on this server. Ask your administrator for an account.
          </div>
        ) : (
          <form onSubmit={(e) => void submit(e)} className="form" noValidate={false}>
            <div className="field">
              <label htmlFor="email">Email</label>
              <input
                id="email"
                type="email"
                autoComplete="email"
                required
                value={email}
                onChange={(e) => setEmail(e.target.value)}
                autoFocus
              />
            </div>
            <div className="field">
              <label htmlFor="password">Password</label>
              <input
                id="password"
                type="password"
                autoComplete={showSignup ? 'new-password' : 'current-password'}
                required
                minLength={showSignup ? info.password.min_length : undefined}
                maxLength={showSignup ? info.password.max_length : undefined}
                value={password}
                onChange={(e) => setPassword(e.target.value)}
                aria-describedby={showSignup ? 'password-hint' : undefined}
              />
              {showSignup && (
                <span id="password-hint" className="hint">
                  At least {info.password.min_length} characters; a passphrase works well.
                </span>
              )}
            </div>
            {error && (
              <div className="form-error" role="alert">
                {error}
              </div>
            )}
            <button type="submit" className="btn btn-primary btn-block" disabled={busy}>
              {busy ? 'Please wait…' : showSignup ? 'Create account' : 'Log in'}
            </button>
          </form>
        )}
        <p className="auth-switch muted">
          {mode === 'signup' ? (
            <>
              Already have an account? <Link to="/login">Log in</Link>
            </>
          ) : signupOpen ? (
            <>
              New here? <Link to="/signup">Create an account</Link>
            </>
          ) : null}
        </p>
      </div>
    </div>
  );
}

function describe(err: unknown): string {
  if (!(err instanceof ApiError)) return 'Something went wrong. Please try again.';
  switch (err.code) {
    case 'invalid_credentials':
      return 'Wrong email or password.';
    case 'too_many_attempts':
      return err.retryAfterSeconds === undefined
        ? 'Too many attempts. Wait a while, then try again.'
        : `Too many attempts. Try again in ${formatWait(err.retryAfterSeconds)}.`;
    case 'signup_closed':
      return 'Sign-up is closed on this server. Ask your administrator for an account.';
    case 'weak_password':
    case 'invalid_email':
      return err.message;
    case 'email_taken':
      return 'An account with this email already exists. Try logging in.';
    default:
      return err.message;
  }
}
