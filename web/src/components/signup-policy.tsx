/** The install's sign-up policy on the Settings page: its owner picks it; the configuration bounds it. */
import { api, type SignupMode } from '../api.js';
import { useAction } from '../lib/use-action.js';
import { useAsync } from '../lib/use-async.js';

const MODES: { mode: SignupMode; label: string; hint: string }[] = [
  { mode: 'open', label: 'Open', hint: 'Anyone who can reach the console can sign up.' },
  { mode: 'invite', label: 'Invite only', hint: 'Only people with an invitation link can sign up.' },
  { mode: 'closed', label: 'Closed', hint: 'Nobody signs up; accounts are made with the CLI.' },
];
const ORDER: SignupMode[] = ['open', 'invite', 'closed'];

export function SignupPolicySection() {
  const policy = useAsync(() => api.signupPolicy(), []);
  const { busy, error, run } = useAction();
  const p = policy.data;
  if (!p) return null;
  return (
    <section className="card section" aria-labelledby="signup-policy-h">
      <h2 id="signup-policy-h">Sign-up</h2>
      <p className="muted">
        {p.can_change
          ? 'Who may create an account on this keyrelay.'
          : 'Who may create an account on this keyrelay. Only its owner (the first account) changes this.'}
        {p.configured !== 'open' &&
          ` The configuration (KEYRELAY_SIGNUP=${p.configured}) allows nothing looser.`}
      </p>
      <fieldset className="signup-policy" disabled={!p.can_change || busy}>
        <legend className="sr-only">Sign-up policy</legend>
        {MODES.map((m) => {
          const looser = ORDER.indexOf(m.mode) < ORDER.indexOf(p.configured);
          return (
            <label key={m.mode} className="signup-policy-option">
              <input
                type="radio"
                name="signup-policy"
                value={m.mode}
                checked={p.effective === m.mode}
                disabled={looser}
                onChange={() =>
                  void run(async () => {
                    await api.setSignupPolicy(m.mode);
                    policy.reload();
                  })
                }
              />
              <span>
                <strong>{m.label}</strong>
                <span className="muted small"> — {m.hint}</span>
              </span>
            </label>
          );
        })}
      </fieldset>
      {error && (
        <div className="form-error" role="alert">
          {error}
        </div>
      )}
    </section>
  );
}
