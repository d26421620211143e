import { useState, type FormEvent } from 'react';
import { ApiError, api, type KeyBudgetStatus, type KeyRateStatus, type KeyView } from '../api.js';
import { BudgetMeter } from './budget-meter.js';
import { RateMeter } from './rate-meter.js';
import {
  diffLimits,
  draftFromLimits,
  fieldOfMessage,
  NO_LIMITS,
  parseDraft,
  type FieldErrors,
  type LimitsDraft,
} from '../lib/limits.js';
import { useAction } from '../lib/use-action.js';
import { Dialog } from './dialog.js';
import { LimitsFields } from './limits-fields.js';

/** A server refusal of the limits, placed next to the field its message names. */
export function errorsFromApi(err: unknown): FieldErrors {
  const message = (err as Error).message;
  if (err instanceof ApiError && (err.code === 'invalid_limits' || err.code === 'invalid_request'))
    return { [fieldOfMessage(message)]: message };
  return { general: message };
}

export function LimitsDialog({
  keyView,
  budget,
  rate,
  onClose,
  onSaved,
}: {
  keyView: KeyView | null;
  /** The budget's spend so far, shown above the fields. */
  budget?: KeyBudgetStatus;
  /** The rpm and tpm limits' use in the last minute, shown above the fields. */
  rate?: KeyRateStatus;
  onClose: () => void;
  onSaved: () => void;
}) {
  const [draft, setDraft] = useState<LimitsDraft>(() => draftFromLimits(keyView ?? NO_LIMITS));
  const action = useAction(errorsFromApi);
  const { busy, setError: setErrors } = action;
  const errors = action.error ?? {};
  // The key's limits are in the fields from the dialog's first frame (an effect would show them empty for
  // one render, and a quick reader or test would see that): state reset while rendering, as React advises.
  const [shownFor, setShownFor] = useState(keyView);
  if (keyView !== shownFor) {
    setShownFor(keyView);
    if (keyView) setDraft(draftFromLimits(keyView));
    setErrors(null);
  }

  async function submit(e: FormEvent): Promise<void> {
    e.preventDefault();
    if (!keyView) return;
    const parsed = parseDraft(draft);
    if (!parsed.ok) {
      setErrors(parsed.errors);
      return;
    }
    const patch = diffLimits(keyView, parsed.limits);
    if (Object.keys(patch).length === 0) {
      onClose();
      return;
    }
    await action.run(async () => {
      await api.updateKeyLimits(keyView.id, patch);
      onSaved();
      onClose();
    });
  }

  return (
    <Dialog open={keyView !== null} title={`Limits for “${keyView?.name ?? ''}”`} onClose={onClose}>
      <form onSubmit={(e) => void submit(e)} className="form" noValidate>
        <p className="muted">
          Requests over a limit are refused by keyrelay with the provider&rsquo;s error shape; nothing is sent
          upstream. Changes take effect immediately, from the key&rsquo;s next request.
        </p>
        {keyView && rate && (rate.rpm || rate.tpm) && (
          <p className="limits-dialog-budget">
            <span className="muted small">Used in the last minute</span>
            {rate.rpm && <RateMeter unit="rpm" r={rate.rpm} now={Date.now()} />}
            {rate.tpm && <RateMeter unit="tpm" r={rate.tpm} now={Date.now()} />}
          </p>
        )}
        {keyView && budget && (
          <p className="limits-dialog-budget">
            <span className="muted small">Spent this period</span>
            <BudgetMeter k={keyView} b={budget} now={Date.now()} />
          </p>
        )}
        <LimitsFields idPrefix="limits" draft={draft} errors={errors} disabled={busy} onChange={setDraft} />
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
            {busy ? 'Saving…' : 'Save limits'}
          </button>
        </div>
      </form>
    </Dialog>
  );
}
