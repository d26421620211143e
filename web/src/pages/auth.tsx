import { useState, type FormEvent } from 'react';
import { ApiError, api, type Account, type CreatedKey, type Info, type SignupNotice } from '../api.js';
import { Logo } from '../components/shell.js';
import { formatWait } from '../lib/format.js';
import { passwordProblem } from '../lib/password.js';
import { Link, useLocation } from '../router.js';

/** What the callback's `?sso_error=` means to the person who was sent back. */
const SSO_ERRORS: Record<string, string> = {
  flow: 'That single sign-on did not start in this browser, was used already or took too long. Try again.',
  idp: 'The identity provider’s answer did not pass keyrelay’s checks. Try again, or ask your administrator.',
  unreachable: 'The identity provider could not be reached. Try again later, or log in with your password.',
  email: 'The identity provider did not give a verified email address.',
  domain: 'Your email address is not one this organization signs in with SSO.',
  account:
    'An account with this email exists outside the organization. Log in with your password, and ask an admin for an invitation.',
  closed: 'Sign-up is closed on this server. Ask your administrator for an account.',
};

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
  const { query } = useLocation();
  const ssoError = query.get('sso_error');
  const [ssoProblem, setSsoProblem] = useState<string | null>(
    ssoError ? (SSO_ERRORS[ssoError] ?? 'Single sign-on failed. Try again.') : null,
  );
  // 'invite' still lets the very first account sign up here (bootstrap); the server refuses the rest.
  const signupOpen = info.signup !== 'closed';
  const showSignup = mode === 'signup' && signupOpen;
  const [tried, setTried] = useState(false);
  // Too long is said at once (nothing is cut off); too short only once the user tries to go on.
  const problem = showSignup ? passwordProblem(password, info.password) : null;
  const weak = problem && (tried || password.length > info.password.max_length) ? problem : null;

  async function submit(e: FormEvent): Promise<void> {
    e.preventDefault();
    setTried(true);
    if (problem) return;
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

  async function sso(): Promise<void> {
    if (!email.includes('@')) {
      setSsoProblem('Enter your work email, then choose Sign in with SSO.');
      return;
    }
    setBusy(true);
    setSsoProblem(null);
    setError(null);
    try {
      const { url } = await api.startSso(email);
      window.location.assign(url);
    } catch (err) {
      setSsoProblem(
        err instanceof ApiError && err.code === 'sso_not_configured'
          ? 'No single sign-on is set up for this email domain. Log in with your password.'
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
                value={password}
                onChange={(e) => setPassword(e.target.value)}
                aria-invalid={weak ? true : undefined}
                aria-describedby={showSignup ? 'password-hint' : undefined}
              />
              {showSignup &&
                (weak ? (
                  <span id="password-hint" className="form-error small" role="alert">
                    {weak}
                  </span>
                ) : (
                  <span id="password-hint" className="hint">
                    At least {info.password.min_length} characters; a passphrase works well.
                  </span>
                ))}
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
        {mode === 'login' && (
          <div className="auth-sso">
            <p className="auth-or muted">or, with your work email above</p>
            {ssoProblem && (
              <div className="form-error" role="alert" data-testid="sso-error">
                {ssoProblem}
              </div>
            )}
            <button
              type="button"
              className="btn btn-secondary btn-block"
              disabled={busy}
              onClick={() => void sso()}
            >
              Sign in with SSO
            </button>
          </div>
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
    case 'sso_required':
      return 'Your organization signs in with single sign-on: enter your email and choose Sign in with SSO.';
    default:
      return err.message;
  }
}
