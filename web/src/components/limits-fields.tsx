import { useState, type KeyboardEvent } from 'react';
import { providerIds, providerLabel } from '../lib/format.js';
import { useSession } from '../session.js';
import { BudgetRow, CountInput, FieldError } from './limit-inputs.js';
import {
  checkModelPattern,
  type FieldErrors,
  type RpmScope,
  type UnpricedPolicy,
  type LimitsDraft,
} from '../lib/limits.js';

/**
 * Chips for the model list: type and press Enter (or comma) to add, × or Backspace to remove. Text left in
 * the box when the form is saved is added then (parseDraft), not on blur, so clicking a × never races it.
 */
function ModelChips({
  id,
  models,
  input,
  error,
  onChange,
}: {
  id: string;
  models: string[];
  input: string;
  error: string | undefined;
  onChange: (models: string[], input: string) => void;
}) {
  const [localError, setLocalError] = useState<string | null>(null);
  const shown = localError ?? error;

  function add(): void {
    const p = input.trim();
    if (!p) return;
    const err = checkModelPattern(p, models);
    setLocalError(err);
    if (!err) onChange([...models, p], '');
  }

  function onKeyDown(e: KeyboardEvent<HTMLInputElement>): void {
    if (e.key === 'Enter' || e.key === ',') {
      // Enter adds a chip; it must not submit the surrounding form.
      e.preventDefault();
      add();
    } else if (e.key === 'Backspace' && input === '' && models.length > 0) {
      onChange(models.slice(0, -1), '');
    }
  }

  return (
    <>
      <div className={`chips ${shown ? 'chips-invalid' : ''}`}>
        {models.map((m) => (
          <span key={m} className="chip">
            <code>{m}</code>
            <button
              type="button"
              className="chip-remove"
              aria-label={`Remove ${m}`}
              onClick={() =>
                onChange(
                  models.filter((x) => x !== m),
                  input,
                )
              }
            >
              ×
            </button>
          </span>
        ))}
        <input
          id={id}
          value={input}
          placeholder={models.length ? 'Add another…' : 'Any model: type a name, press Enter'}
          aria-describedby={`${id}-hint${shown ? ` ${id}-error` : ''}`}
          aria-invalid={shown ? true : undefined}
          autoComplete="off"
          spellCheck={false}
          onChange={(e) => {
            setLocalError(null);
            onChange(models, e.target.value);
          }}
          onKeyDown={onKeyDown}
        />
      </div>
      <span id={`${id}-hint`} className="hint">
        Exact names, or a prefix ending in <code>*</code>: <code>gpt-4o*</code> matches gpt-4o-mini and
        gpt-4o-2024-08-06. <code>*</code> only at the end. Empty: any model.
      </span>
      <FieldError id={`${id}-error`} message={shown ?? undefined} />
    </>
  );
}

/** The four limit controls, shared by the create-key dialog and the Limits dialog. */
export function LimitsFields({
  idPrefix,
  draft,
  errors,
  disabled,
  onChange,
  member = false,
}: {
  idPrefix: string;
  draft: LimitsDraft;
  errors: FieldErrors;
  disabled?: boolean;
  onChange: (d: LimitsDraft) => void;
  /** A member's limits across their keys: requests per minute and a budget only. */
  member?: boolean;
}) {
  const set = (patch: Partial<LimitsDraft>): void => onChange({ ...draft, ...patch });
  const id = (s: string): string => `${idPrefix}-${s}`;
  const budgetSet = draft.budget.trim() !== '';
  const providers = providerIds(useSession().info);
  return (
    <fieldset className="limits-fields" disabled={disabled}>
      {!member && (
        <>
          <fieldset className="field" aria-describedby={id('providers-hint')}>
            <legend>Providers</legend>
            <div className="checks">
              {providers.map((p) => (
                <label key={p} className="check">
                  <input
                    type="checkbox"
                    checked={draft.providers.includes(p)}
                    onChange={(e) =>
                      set({
                        providers: e.target.checked
                          ? [...draft.providers, p]
                          : draft.providers.filter((x) => x !== p),
                      })
                    }
                  />
                  {providerLabel(p)}
                </label>
              ))}
            </div>
            <span id={id('providers-hint')} className="hint">
              None ticked: any provider.
            </span>
            <FieldError id={id('providers-error')} message={errors.providers} />
          </fieldset>

          <div className="field">
            <label htmlFor={id('models')}>Models</label>
            <ModelChips
              id={id('models')}
              models={draft.models}
              input={draft.modelInput}
              error={errors.models}
              onChange={(models, modelInput) => set({ models, modelInput })}
            />
          </div>
        </>
      )}

      <div className="field">
        <label htmlFor={id('rpm')}>Requests per minute</label>
        <CountInput
          id={id('rpm')}
          value={draft.rpm}
          invalid={Boolean(errors.rpm)}
          onChange={(v) => set({ rpm: v })}
        />
        {!member && (
          <>
            <label className="sr-only" htmlFor={id('scope')}>
              What counts
            </label>
            <select
              id={id('scope')}
              value={draft.scope}
              onChange={(e) => set({ scope: e.target.value as RpmScope })}
            >
              <option value="billable">billable calls</option>
              <option value="all">every call</option>
            </select>
          </>
        )}
        <span id={id('rpm-hint')} className="hint">
          {member
            ? 'All of the member’s keys here together, beside each key’s own limit. Billable calls only. Empty: no limit.'
            : 'Sliding one-minute window. Billable calls: model lists, retrievals and token counting do not count. Empty: no limit.'}
        </span>
        <FieldError id={id('rpm-error')} message={errors.rpm} />
      </div>

      {!member && (
        <>
          <div className="field">
            <label htmlFor={id('tpm')}>Tokens per minute</label>
            <CountInput
              id={id('tpm')}
              value={draft.tpm}
              invalid={Boolean(errors.tpm)}
              onChange={(v) => set({ tpm: v })}
            />
            <span id={id('tpm-hint')} className="hint">
              Input and output. A request counts its prompt and its max output while in flight, its real
              tokens once done. Empty: no limit.
            </span>
            <FieldError id={id('tpm-error')} message={errors.tpm} />
          </div>

          <div className="field">
            <label htmlFor={id('concurrent')}>Requests at once</label>
            <CountInput
              id={id('concurrent')}
              value={draft.concurrent}
              invalid={Boolean(errors.concurrent)}
              onChange={(v) => set({ concurrent: v })}
            />
            <span id={id('concurrent-hint')} className="hint">
              Requests in flight at the same time. Empty: no limit.
            </span>
            <FieldError id={id('concurrent-error')} message={errors.concurrent} />
          </div>
        </>
      )}

      <div className="field">
        <label htmlFor={id('budget')}>Budget (USD)</label>
        <BudgetRow
          id={{ amount: id('budget'), period: id('period'), mode: id('mode') }}
          labels={{ period: 'Budget period', mode: 'Budget mode' }}
          amount={draft.budget}
          period={draft.period}
          mode={draft.mode}
          invalid={Boolean(errors.budget)}
          onChange={(p) =>
            set({
              ...(p.amount !== undefined && { budget: p.amount }),
              ...(p.period && { period: p.period }),
              ...(p.mode && { mode: p.mode }),
            })
          }
        />
        <span id={id('budget-hint')} className="hint">
          Resets {draft.period === 'day' ? 'at 00:00 UTC' : 'on the 1st (UTC)'}.{' '}
          {draft.mode === 'hard'
            ? `Hard: each request reserves its most expensive outcome first and is refused if that would pass the budget. Calls keyrelay cannot price are ${draft.unpriced === 'allow' ? 'let through and count their known cost only' : 'refused'}.`
            : 'Soft: a request in progress can overshoot it. Requests with an unknown price do not count.'}
        </span>
        {member && (
          <span className="hint">
            Spent by all of the member’s keys here together; each key’s own budget applies too, and the
            tighter one refuses.
          </span>
        )}
        {draft.mode === 'hard' && !member && (
          <div className="unpriced-row">
            <label htmlFor={id('unpriced')}>Calls keyrelay cannot price</label>
            <select
              id={id('unpriced')}
              value={draft.unpriced}
              disabled={!budgetSet}
              onChange={(e) => set({ unpriced: e.target.value as UnpricedPolicy })}
            >
              <option value="refuse">refuse</option>
              <option value="allow">allow</option>
            </select>
          </div>
        )}
        <FieldError id={id('budget-error')} message={errors.budget} />
      </div>

      {!member && (
        <fieldset className="field per-end-user" aria-describedby={id('user-hint')}>
          <legend>Per end user</legend>
          <span id={id('user-hint')} className="hint">
            Each end user the requests name (<code>proxy-user</code>, Helicone-User-Id, or the body’s{' '}
            <code>user</code>) on its own, under the key’s limits. Requests that name none are not capped
            here.
          </span>
          <div className="field">
            <label htmlFor={id('user-rpm')}>Calls per minute per end user</label>
            <CountInput
              id={id('user-rpm')}
              value={draft.userRpm}
              invalid={Boolean(errors.userRpm)}
              onChange={(v) => set({ userRpm: v })}
            />
            <span id={id('user-rpm-hint')} className="hint">
              Counted like the key’s. Empty: no limit.
            </span>
            <FieldError id={id('user-rpm-error')} message={errors.userRpm} />
          </div>
          <div className="field">
            <label htmlFor={id('user-budget')}>Budget per end user (USD)</label>
            <BudgetRow
              id={{ amount: id('user-budget'), period: id('user-period'), mode: id('user-mode') }}
              labels={{
                period: 'Period of the budget per end user',
                mode: 'Mode of the budget per end user',
              }}
              amount={draft.userBudget}
              period={draft.userPeriod}
              mode={draft.userMode}
              invalid={Boolean(errors.userBudget)}
              onChange={(p) =>
                set({
                  ...(p.amount !== undefined && { userBudget: p.amount }),
                  ...(p.period && { userPeriod: p.period }),
                  ...(p.mode && { userMode: p.mode }),
                })
              }
            />
            <span id={id('user-budget-hint')} className="hint">
              {draft.userMode === 'hard'
                ? 'Hard: reserved per request as for the key’s hard budget; calls keyrelay cannot price follow the key’s setting.'
                : 'Soft: a request in progress can overshoot it.'}{' '}
              Empty: no budget.
            </span>
            <FieldError id={id('user-budget-error')} message={errors.userBudget} />
          </div>
        </fieldset>
      )}
    </fieldset>
  );
}
