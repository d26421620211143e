/**
 * Sign-up attempts on the signed-in account's address. Sign-up answers the same whether or not an address
 * has an account (so it cannot be used to find accounts); the owner learns of such attempts here instead,
 * once, at their next sign-in.
 */
import type { SignupNotice } from '../api.js';
import { formatDateTime } from '../lib/format.js';

export function SignupNotices({ notices, onDismiss }: { notices: SignupNotice[]; onDismiss: () => void }) {
  if (notices.length === 0) return null;
  const n = notices.length;
  return (
    <div className="callout notice-callout" role="status" data-testid="signup-notices">
      <div>
        <strong>
          {n === 1
            ? 'Someone tried to sign up with your email address'
            : `${n} sign-up attempts with your email address`}
        </strong>
        <ul className="notice-list">
          {notices.map((x) => (
            <li key={`${x.at}-${x.ip}`}>
              {formatDateTime(x.at)}
              {x.ip ? <span className="muted"> from {x.ip}</span> : null}
            </li>
          ))}
        </ul>
        <p className="small muted">
          Nothing was changed: your password, keys and logs are as they were. If this was you, there is
          nothing to do; you already have an account.
        </p>
      </div>
      <button type="button" className="btn btn-ghost btn-sm" onClick={onDismiss}>
        Dismiss
      </button>
    </div>
  );
}
