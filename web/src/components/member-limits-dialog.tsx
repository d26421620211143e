import { useState, type FormEvent } from 'react';
import { api, type MemberLimits, type MemberLimitsView, type Membership } from '../api.js';
import { draftFromLimits, NO_LIMITS, parseDraft, type LimitsDraft } from '../lib/limits.js';
import { useAction } from '../lib/use-action.js';
import { useAsync } from '../lib/use-async.js';
import { BudgetMeter } from './budget-meter.js';
import { Dialog } from './dialog.js';
import { errorsFromApi } from './limits-dialog.js';
import { LimitsFields } from './limits-fields.js';
import { LoadingState } from './states.js';

const draftOf = (l: MemberLimits): LimitsDraft => draftFromLimits({ ...NO_LIMITS, ...l });

/** What changed between two sets of a member's limits (only those fields are sent). */
function diffMemberLimits(before: MemberLimits, after: MemberLimits): Partial<MemberLimits> {
  const out: Partial<MemberLimits> = {};
  for (const f of ['rate_limit_rpm', 'budget_usd', 'budget_period', 'budget_mode'] as const)
    if (before[f] !== after[f]) Object.assign(out, { [f]: after[f] });
  return out;
}

/** The fields, filled from the member's limits as read when the dialog opened. */
function MemberLimitsForm({
  org,
  member,
  view,
  onClose,
  onSaved,
}: {
  org: string;
  member: Membership;
  view: MemberLimitsView;
  onClose: () => void;
  onSaved: () => void;
}) {
  const [draft, setDraft] = useState<LimitsDraft>(() => draftOf(view.limits));
  const action = useAction(errorsFromApi);
  const { busy, setError: setErrors } = action;
  const errors = action.error ?? {};

  async function submit(e: FormEvent): Promise<void> {
    e.preventDefault();
    const parsed = parseDraft(draft);
    if (!parsed.ok) {
      setErrors(parsed.errors);
      return;
    }
    const l = parsed.limits;
    const patch = diffMemberLimits(view.limits, {
      rate_limit_rpm: l.rate_limit_rpm,
      budget_usd: l.budget_usd,
      budget_period: l.budget_period,
      budget_mode: l.budget_mode,
    });
    if (Object.keys(patch).length === 0) {
      onClose();
      return;
    }
    await action.run(async () => {
      await api.setMemberLimits(org, member.account_id, patch);
      onSaved();
      onClose();
    });
  }

  return (
    <form onSubmit={(e) => void submit(e)} className="form" noValidate>
      <p className="muted">
        These bound all of {member.email}&rsquo;s keys in this organization together (service keys are no
        one&rsquo;s); each key&rsquo;s own limits apply too. Changes take effect at once, on every instance.
      </p>
      {view.budget && (
        <p className="limits-dialog-budget">
          <span className="muted small">Spent this period, all their keys</span>
          <BudgetMeter k={view.limits} b={view.budget} now={Date.now()} />
        </p>
      )}
      <LimitsFields
        idPrefix="member-limits"
        member
        draft={draft}
        errors={errors}
        disabled={busy}
        onChange={setDraft}
      />
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
  );
}

/** An admin's view of one member's limits across their keys (the Team page). */
export function MemberLimitsDialog({
  org,
  member,
  onClose,
  onSaved,
}: {
  org: string;
  member: Membership | null;
  onClose: () => void;
  onSaved: () => void;
}) {
  const account = member?.account_id ?? null;
  const view = useAsync(
    () => (account === null ? Promise.resolve(null) : api.getMemberLimits(org, account)),
    [org, account],
  );
  return (
    <Dialog open={member !== null} title={`Limits for ${member?.email ?? ''}`} onClose={onClose}>
      {member && view.error ? (
        <div className="form-error" role="alert">
          {view.error.message}
        </div>
      ) : member && view.data && !view.loading ? (
        <MemberLimitsForm
          key={account}
          org={org}
          member={member}
          view={view.data}
          onClose={onClose}
          onSaved={onSaved}
        />
      ) : (
        <LoadingState />
      )}
    </Dialog>
  );
}
