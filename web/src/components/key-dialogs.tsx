import { useEffect, useState, type FormEvent } from 'react';
import { api, type CreatedKey, type KeyView } from '../api.js';
import {
  diffLimits,
  draftFromLimits,
  NO_LIMITS,
  parseDraft,
  type FieldErrors,
  type LimitsDraft,
} from '../lib/limits.js';
import { Dialog } from './dialog.js';
import { KeyReveal } from './key-reveal.js';
import { useAction } from '../lib/use-action.js';
import { errorsFromApi } from './limits-dialog.js';
import { LimitsFields } from './limits-fields.js';
import { pickOrg } from '../pages/team.js';

const GRACE_OPTIONS = [
  { seconds: 0, label: 'Immediately' },
  { seconds: 5 * 60, label: '5 minutes' },
  { seconds: 3600, label: '1 hour' },
  { seconds: 6 * 3600, label: '6 hours' },
  { seconds: 12 * 3600, label: '12 hours' },
  { seconds: 24 * 3600, label: '24 hours' },
];

function DoneFooter({ onClose }: { onClose: () => void }) {
  return (
    <button type="button" className="btn btn-primary" onClick={onClose}>
      Done
    </button>
  );
}

export function CreateKeyDialog({
  open,
  onClose,
  onCreated,
}: {
  open: boolean;
  onClose: () => void;
  onCreated: () => void;
}) {
  const [name, setName] = useState('');
  const [service, setService] = useState(false);
  // Owners and admins of a team may make the organization's own keys; asked when the dialog opens, so the
  // Keys page itself loads no more than before.
  const [offerService, setOfferService] = useState(false);
  useEffect(() => {
    if (!open) return;
    let live = true;
    setOfferService(false);
    api.listOrgs().then(
      ({ orgs }) => {
        const org = pickOrg(orgs);
        if (live) setOfferService(!!org && !org.personal && (org.role === 'owner' || org.role === 'admin'));
      },
      // Without the answer the dialog still makes a member's key, as it always could.
      () => undefined,
    );
    return () => {
      live = false;
    };
  }, [open]);
  const [created, setCreated] = useState<CreatedKey | null>(null);
  const [limitsOpen, setLimitsOpen] = useState(false);
  const action = useAction((err): FieldErrors => {
    const next = errorsFromApi(err);
    if (!next.general) setLimitsOpen(true);
    return next;
  });
  const { busy, setError: setErrors } = action;
  const errors = action.error ?? {};
  const [draft, setDraft] = useState<LimitsDraft>(() => draftFromLimits(NO_LIMITS));
  useEffect(() => {
    if (open) {
      setName('');
      setService(false);
      setCreated(null);
      setErrors(null);
      setDraft(draftFromLimits(NO_LIMITS));
      setLimitsOpen(false);
    }
  }, [open, setErrors]);

  async function submit(e: FormEvent): Promise<void> {
    e.preventDefault();
    // The form skips native validation (so limit errors read like the server's); the name is checked here.
    if (!name.trim()) {
      setErrors({ general: 'Give the key a name.' });
      return;
    }
    const parsed = parseDraft(draft);
    if (!parsed.ok) {
      setErrors(parsed.errors);
      setLimitsOpen(true);
      return;
    }
    await action.run(async () => {
      const r = await api.createKey(name.trim(), diffLimits(NO_LIMITS, parsed.limits), service);
      setCreated(r.key);
      onCreated();
    });
  }

  return (
    <Dialog
      open={open}
      title={created ? 'Key created' : 'Create key'}
      onClose={() => {
        setCreated(null);
        onClose();
      }}
      footer={created ? <DoneFooter onClose={onClose} /> : undefined}
    >
      {created ? (
        <KeyReveal value={created.key} label={`New key ${created.name}`} />
      ) : (
        <form onSubmit={(e) => void submit(e)} className="form" noValidate>
          <div className="field">
            <label htmlFor="new-key-name">Name</label>
            <input
              id="new-key-name"
              value={name}
              onChange={(e) => setName(e.target.value)}
              placeholder="e.g. production, staging, laptop"
              maxLength={100}
              required
              autoFocus
            />
            <span className="hint">Only you see it; pick something that says where the key is used.</span>
          </div>
          {offerService && (
            <div className="field">
              <label className="check">
                <input type="checkbox" checked={service} onChange={(e) => setService(e.target.checked)} />
                Service key
              </label>
              <span className="hint">
                The organization&rsquo;s key, held by nobody: it keeps working when you leave, and only owners
                and admins see and manage it.
              </span>
            </div>
          )}
          <details
            className="disclosure"
            open={limitsOpen}
            onToggle={(e) => setLimitsOpen(e.currentTarget.open)}
          >
            <summary>Limits (optional)</summary>
            <LimitsFields idPrefix="new-key-limits" draft={draft} errors={errors} onChange={setDraft} />
            <p className="hint">You can change these any time from the key&rsquo;s Limits action.</p>
          </details>
          {errors.general && (
            <div className="form-error" role="alert">
              {errors.general}
            </div>
          )}
          <div className="dialog-actions">
            <button type="button" className="btn btn-ghost" onClick={onClose}>
              Cancel
            </button>
            <button type="submit" className="btn btn-primary" disabled={busy}>
              {busy ? 'Creating…' : 'Create key'}
            </button>
          </div>
        </form>
      )}
    </Dialog>
  );
}

export function RollKeyDialog({
  keyView,
  onClose,
  onRolled,
}: {
  keyView: KeyView | null;
  onClose: () => void;
  onRolled: () => void;
}) {
  const [grace, setGrace] = useState(3600);
  const [created, setCreated] = useState<CreatedKey | null>(null);
  const { busy, error, setError, run } = useAction();
  useEffect(() => {
    setGrace(3600);
    setCreated(null);
    setError(null);
  }, [keyView, setError]);

  async function submit(e: FormEvent): Promise<void> {
    e.preventDefault();
    if (!keyView) return;
    await run(async () => {
      const r = await api.rollKey(keyView.id, grace);
      setCreated(r.key);
      onRolled();
    });
  }

  return (
    <Dialog
      open={keyView !== null}
      title={created ? 'Key rolled' : `Roll “${keyView?.name ?? ''}”`}
      onClose={onClose}
      footer={created ? <DoneFooter onClose={onClose} /> : undefined}
    >
      {created ? (
        <>
          <p className="muted">
            Replace the old key with this one.{' '}
            {grace === 0
              ? 'The old key has stopped working.'
              : `The old key keeps working for ${GRACE_OPTIONS.find((g) => g.seconds === grace)?.label ?? `${grace} s`}.`}
          </p>
          <KeyReveal value={created.key} label={`New key ${created.name}`} />
        </>
      ) : (
        <form onSubmit={(e) => void submit(e)} className="form">
          <p className="muted">
            Rolling creates a new key with the same name. The old key <code>{keyView?.hint}</code> keeps
            working for a grace period so you can deploy the new one without downtime.
          </p>
          <div className="field">
            <label htmlFor="grace">Old key stops working</label>
            <select id="grace" value={grace} onChange={(e) => setGrace(Number(e.target.value))}>
              {GRACE_OPTIONS.map((g) => (
                <option key={g.seconds} value={g.seconds}>
                  {g.seconds === 0 ? 'Immediately' : `After ${g.label}`}
                </option>
              ))}
            </select>
          </div>
          {error && (
            <div className="form-error" role="alert">
              {error}
            </div>
          )}
          <div className="dialog-actions">
            <button type="button" className="btn btn-ghost" onClick={onClose}>
              Cancel
            </button>
            <button type="submit" className="btn btn-primary" disabled={busy}>
              {busy ? 'Rolling…' : 'Roll key'}
            </button>
          </div>
        </form>
      )}
    </Dialog>
  );
}

export function RevokeKeyDialog({
  keyView,
  onClose,
  onRevoked,
}: {
  keyView: KeyView | null;
  onClose: () => void;
  onRevoked: () => void;
}) {
  const { busy, error, setError, run } = useAction();
  useEffect(() => setError(null), [keyView, setError]);

  async function revoke(): Promise<void> {
    if (!keyView) return;
    await run(async () => {
      await api.revokeKey(keyView.id);
      onRevoked();
      onClose();
    });
  }

  return (
    <Dialog
      open={keyView !== null}
      title="Revoke key?"
      onClose={onClose}
      footer={
        <>
          <button type="button" className="btn btn-ghost" onClick={onClose} autoFocus>
            Cancel
          </button>
          <button type="button" className="btn btn-danger" disabled={busy} onClick={() => void revoke()}>
            {busy ? 'Revoking…' : 'Revoke key'}
          </button>
        </>
      }
    >
      <p>
        <strong>{keyView?.name}</strong> (<code>{keyView?.hint}</code>) will stop working immediately.
        Requests using it are refused with <code>proxy_key_revoked</code>. This cannot be undone.
      </p>
      {error && (
        <div className="form-error" role="alert">
          {error}
        </div>
      )}
    </Dialog>
  );
}
