import { useState, type FormEvent } from 'react';
import { ApiError, api } from '../api.js';
import { useAction } from '../lib/use-action.js';
import { ApiTokens } from '../components/api-tokens.js';
import { PageHeader } from '../components/page-header.js';
import { RetentionDaysForm } from '../components/retention-form.js';
import { passwordProblem } from '../lib/password.js';
import { useSession } from '../session.js';
import { SignupPolicySection } from '../components/signup-policy.js';
import { ProviderBillsSection } from './reconcile.js';

function PasswordForm() {
  const { info } = useSession();
  const min = info.password.min_length;
  const [current, setCurrent] = useState('');
  const [next, setNext] = useState('');
  const [confirm, setConfirm] = useState('');
  const [done, setDone] = useState<string | null>(null);
  const { busy, error, setError, run } = useAction((err) =>
    err instanceof ApiError && err.code === 'wrong_password'
      ? 'Your current password is not correct.'
      : (err as Error).message,
  );
  const clearStatus = () => {
    setError(null);
    setDone(null);
  };
  const status =
    error !== null ? { ok: false, text: error } : done !== null ? { ok: true, text: done } : null;
  const [triedSubmit, setTriedSubmit] = useState(false);
  // Worked out from what is typed now, so the message goes away as soon as the two match.
  const mismatch = confirm !== '' && next !== confirm && (triedSubmit || confirm.length >= next.length);
  const problem = passwordProblem(next, info.password);
  // Too long is said at once (nothing is cut off); too short only once the user tries to save.
  const weak = problem && (triedSubmit || next.length > info.password.max_length) ? problem : null;
  const same = next !== '' && next === current;

  async function submit(e: FormEvent): Promise<void> {
    e.preventDefault();
    setTriedSubmit(true);
    if (next !== confirm || problem || same) return;
    setDone(null);
    await run(async () => {
      await api.changePassword(current, next);
      setCurrent('');
      setNext('');
      setConfirm('');
      setTriedSubmit(false);
      setDone('Password changed. Other sessions were logged out.');
    });
  }

  return (
    <form className="form form-narrow" onSubmit={(e) => void submit(e)}>
      <div className="field">
        <label htmlFor="current-password">Current password</label>
        <input
          id="current-password"
          type="password"
          autoComplete="current-password"
          required
          value={current}
          onChange={(e) => setCurrent(e.target.value)}
        />
      </div>
      <div className="field">
        <label htmlFor="new-password">New password</label>
        <input
          id="new-password"
          type="password"
          autoComplete="new-password"
          required
          value={next}
          aria-invalid={weak || same ? true : undefined}
          aria-describedby="new-password-hint"
          onChange={(e) => {
            setNext(e.target.value);
            clearStatus();
          }}
        />
        {weak || same ? (
          <span id="new-password-hint" className="form-error small" role="alert">
            {weak ?? 'This is your current password; choose another.'}
          </span>
        ) : (
          <span id="new-password-hint" className="hint">
            At least {min} characters.
          </span>
        )}
      </div>
      <div className="field">
        <label htmlFor="confirm-password">Confirm new password</label>
        <input
          id="confirm-password"
          type="password"
          autoComplete="new-password"
          required
          value={confirm}
          aria-invalid={mismatch || undefined}
          aria-describedby={mismatch ? 'confirm-password-error' : undefined}
          onChange={(e) => {
            setConfirm(e.target.value);
            clearStatus();
          }}
        />
        {mismatch && (
          <span id="confirm-password-error" className="form-error small" role="alert">
            The new passwords do not match.
          </span>
        )}
      </div>
      {status && (
        <div className={status.ok ? 'form-success' : 'form-error'} role={status.ok ? 'status' : 'alert'}>
          {status.text}
        </div>
      )}
      <div>
        <button type="submit" className="btn btn-primary" disabled={busy}>
          {busy ? 'Saving…' : 'Change password'}
        </button>
      </div>
    </form>
  );
}

/** The server's own bound (src/console-api/settings-routes.ts). */
const MAX_BODY_DAYS = 3650;

const loadBodyRetention = () => api.getSettings().then(({ settings }) => settings.body_retention_days);

function BodyRetentionForm() {
  return (
    <RetentionDaysForm
      id="body-retention"
      label="Keep request bodies for"
      max={MAX_BODY_DAYS}
      placeholder="As long as the rows"
      hint="Request and response bodies of this account's requests are deleted after this many days; the requests themselves (model, tokens, cost) stay. Empty or 0: as long as the requests."
      load={loadBodyRetention}
      save={(days) =>
        api.saveSettings({ body_retention_days: days }).then(({ settings }) => settings.body_retention_days)
      }
      savedText={(days) =>
        days === null
          ? 'Bodies are kept as long as their requests.'
          : `Bodies older than ${days} days are dropped within the hour.`
      }
    />
  );
}

export function SettingsPage() {
  const { account, signOut } = useSession();
  return (
    <>
      <PageHeader title="Settings" />
      <section className="card section" aria-labelledby="account-h">
        <h2 id="account-h">Account</h2>
        <div className="settings-row">
          <div>
            <div className="muted small">Email</div>
            <div>{account.email}</div>
          </div>
          <button type="button" className="btn btn-secondary" onClick={() => void signOut()}>
            Log out
          </button>
        </div>
      </section>
      <section className="card section" aria-labelledby="bodies-h">
        <h2 id="bodies-h">Request log</h2>
        <BodyRetentionForm />
      </section>
      <section className="card section" aria-labelledby="password-h">
        <h2 id="password-h">Change password</h2>
        <p className="muted">Changing it logs out every other session on this account.</p>
        <PasswordForm />
      </section>
      <SignupPolicySection />
      <ProviderBillsSection />
      <section className="card section" aria-labelledby="tokens-h">
        <h2 id="tokens-h">API tokens</h2>
        <p className="muted">Read-only tokens for scripts and BI tools: usage, requests, export.</p>
        <ApiTokens />
      </section>
    </>
  );
}
