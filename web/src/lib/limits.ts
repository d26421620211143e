/**
 * Key limits in the console: the editable draft behind the limits form, the PATCH it turns into, the
 * compact one-line summary for the key list, and labels for keyrelay's refusal codes. Ranges mirror the
 * server's (src/limits/settings.ts) so most mistakes are caught before a round trip; the server stays the
 * judge and its message is shown next to the field it names.
 */
import type { KeyLimits, MemberLimits, Provider } from '../api.js';
import { providerLabel } from './format.js';

export type BudgetPeriod = 'day' | 'month';
export type BudgetMode = 'soft' | 'hard';
export type RpmScope = 'billable' | 'all';
export type UnpricedPolicy = 'refuse' | 'allow';
export type LimitField =
  'providers' | 'models' | 'rpm' | 'budget' | 'tpm' | 'concurrent' | 'userRpm' | 'userBudget';
export type FieldErrors = Partial<Record<LimitField | 'general', string>>;

export const MAX_MODELS = 50;
export const MAX_RPM = 1_000_000;
export const MAX_TPM = 1_000_000_000;
export const MAX_CONCURRENT = 100_000;
export const MIN_BUDGET = 0.01;
export const MAX_BUDGET = 1_000_000;

export const NO_LIMITS: KeyLimits = {
  allowed_providers: null,
  allowed_models: null,
  rate_limit_rpm: null,
  budget_usd: null,
  budget_period: null,
  budget_mode: 'soft',
  rate_limit_tpm: null,
  max_concurrent: null,
  rate_limit_scope: 'billable',
  budget_unpriced: 'refuse',
  user_rate_limit_rpm: null,
  user_budget_usd: null,
  user_budget_period: null,
  user_budget_mode: 'soft',
};

/** What the form edits: text as typed, so a half-typed number is not lost or coerced. */
export interface LimitsDraft {
  providers: Provider[]; // none ticked = any
  models: string[]; // empty = any
  modelInput: string; // typed but not yet added with Enter
  rpm: string;
  budget: string;
  period: BudgetPeriod;
  mode: BudgetMode;
  unpriced: UnpricedPolicy;
  tpm: string;
  concurrent: string;
  scope: RpmScope;
  /** Caps for each end user (proxy-user) of the key. */
  userRpm: string;
  userBudget: string;
  userPeriod: BudgetPeriod;
  userMode: BudgetMode;
}

export function draftFromLimits(l: KeyLimits): LimitsDraft {
  return {
    providers: l.allowed_providers ? [...l.allowed_providers] : [],
    models: l.allowed_models ? [...l.allowed_models] : [],
    modelInput: '',
    rpm: l.rate_limit_rpm === null ? '' : String(l.rate_limit_rpm),
    budget: l.budget_usd === null ? '' : String(l.budget_usd),
    period: l.budget_period ?? 'month',
    mode: l.budget_mode,
    unpriced: l.budget_unpriced,
    tpm: l.rate_limit_tpm === null ? '' : String(l.rate_limit_tpm),
    concurrent: l.max_concurrent === null ? '' : String(l.max_concurrent),
    scope: l.rate_limit_scope,
    userRpm: l.user_rate_limit_rpm === null ? '' : String(l.user_rate_limit_rpm),
    userBudget: l.user_budget_usd === null ? '' : String(l.user_budget_usd),
    userPeriod: l.user_budget_period ?? 'month',
    userMode: l.user_budget_mode,
  };
}

export function hasLimits(l: KeyLimits): boolean {
  return (
    l.allowed_providers !== null ||
    l.allowed_models !== null ||
    l.rate_limit_rpm !== null ||
    l.budget_usd !== null ||
    l.rate_limit_tpm !== null ||
    l.max_concurrent !== null ||
    l.user_rate_limit_rpm !== null ||
    l.user_budget_usd !== null
  );
}

/** Why a model pattern is refused, or null when it is fine (same rule as the server). */
export function checkModelPattern(p: string, existing: readonly string[]): string | null {
  if (!p) return null;
  if (/[\s\x00-\x1f]/.test(p)) return 'Model names have no spaces.';
  if (p.length > 200) return 'At most 200 characters.';
  const star = p.indexOf('*');
  if (star !== -1 && star !== p.length - 1) return '“*” is allowed only at the end, e.g. gpt-4o*.';
  if (existing.includes(p)) return `${p} is already in the list.`;
  if (existing.length >= MAX_MODELS) return `At most ${MAX_MODELS} models.`;
  return null;
}

type Parsed = { ok: true; limits: KeyLimits } | { ok: false; errors: FieldErrors };

/** The limits the draft describes, or per-field errors. A model still in the input box counts as added. */
export function parseDraft(d: LimitsDraft): Parsed {
  const errors: FieldErrors = {};
  const pending = d.modelInput.trim();
  const models = [...d.models];
  if (pending) {
    const err = checkModelPattern(pending, models);
    if (err && !models.includes(pending)) errors.models = err;
    else if (!models.includes(pending)) models.push(pending);
  }
  let rpm: number | null = null;
  if (d.rpm.trim()) {
    rpm = Number(d.rpm);
    if (!Number.isInteger(rpm) || rpm < 1 || rpm > MAX_RPM)
      errors.rpm = `A whole number from 1 to ${MAX_RPM.toLocaleString('en-US')}, or empty for no limit.`;
  }
  const whole = (text: string, max: number, field: 'tpm' | 'concurrent' | 'userRpm'): number | null => {
    if (!text.trim()) return null;
    const v = Number(text);
    if (!Number.isInteger(v) || v < 1 || v > max)
      errors[field] = `A whole number from 1 to ${max.toLocaleString('en-US')}, or empty for no limit.`;
    return v;
  };
  const tpm = whole(d.tpm, MAX_TPM, 'tpm');
  const concurrent = whole(d.concurrent, MAX_CONCURRENT, 'concurrent');
  const userRpm = whole(d.userRpm, MAX_RPM, 'userRpm');
  let userBudget: number | null = null;
  if (d.userBudget.trim()) {
    userBudget = Number(d.userBudget);
    if (!Number.isFinite(userBudget) || userBudget < MIN_BUDGET || userBudget > MAX_BUDGET)
      errors.userBudget = `From $${MIN_BUDGET} to $${MAX_BUDGET.toLocaleString('en-US')}, or empty for no budget.`;
  }
  let budget: number | null = null;
  if (d.budget.trim()) {
    budget = Number(d.budget);
    if (!Number.isFinite(budget) || budget < MIN_BUDGET || budget > MAX_BUDGET)
      errors.budget = `From $${MIN_BUDGET} to $${MAX_BUDGET.toLocaleString('en-US')}, or empty for no budget.`;
  }
  if (Object.keys(errors).length > 0) return { ok: false, errors };
  return {
    ok: true,
    limits: {
      allowed_providers: d.providers.length ? [...d.providers] : null,
      allowed_models: models.length ? models : null,
      rate_limit_rpm: rpm,
      budget_usd: budget,
      budget_period: budget === null ? null : d.period,
      budget_mode: d.mode,
      rate_limit_tpm: tpm,
      max_concurrent: concurrent,
      rate_limit_scope: d.scope,
      budget_unpriced: d.unpriced,
      user_rate_limit_rpm: userRpm,
      user_budget_usd: userBudget,
      user_budget_period: userBudget === null ? null : d.userPeriod,
      user_budget_mode: d.userMode,
    },
  };
}

const sameList = (a: readonly string[] | null, b: readonly string[] | null): boolean =>
  a === b || (a !== null && b !== null && a.length === b.length && a.every((x, i) => x === b[i]));
/** Providers are a set: the server keeps them in its own order. */
const sameSet = (a: readonly string[] | null, b: readonly string[] | null): boolean =>
  a === b || (a !== null && b !== null && a.length === b.length && a.every((x) => b.includes(x)));

/**
 * Only the fields that differ from `before`, as PATCH /keys/:id takes them (null clears a limit). The period
 * travels with the budget: the server refuses a period without a budget.
 */
export function diffLimits(before: KeyLimits, after: KeyLimits): Partial<KeyLimits> {
  const patch: Partial<KeyLimits> = {};
  if (!sameSet(before.allowed_providers, after.allowed_providers))
    patch.allowed_providers = after.allowed_providers;
  if (!sameList(before.allowed_models, after.allowed_models)) patch.allowed_models = after.allowed_models;
  if (before.rate_limit_rpm !== after.rate_limit_rpm) patch.rate_limit_rpm = after.rate_limit_rpm;
  if (before.rate_limit_scope !== after.rate_limit_scope) patch.rate_limit_scope = after.rate_limit_scope;
  if (before.rate_limit_tpm !== after.rate_limit_tpm) patch.rate_limit_tpm = after.rate_limit_tpm;
  if (before.max_concurrent !== after.max_concurrent) patch.max_concurrent = after.max_concurrent;
  if (before.budget_mode !== after.budget_mode) patch.budget_mode = after.budget_mode;
  if (before.budget_unpriced !== after.budget_unpriced) patch.budget_unpriced = after.budget_unpriced;
  if (after.budget_usd === null) {
    if (before.budget_usd !== null) patch.budget_usd = null;
  } else if (before.budget_usd !== after.budget_usd || before.budget_period !== after.budget_period) {
    patch.budget_usd = after.budget_usd;
    patch.budget_period = after.budget_period;
  }
  if (before.user_rate_limit_rpm !== after.user_rate_limit_rpm)
    patch.user_rate_limit_rpm = after.user_rate_limit_rpm;
  if (before.user_budget_mode !== after.user_budget_mode) patch.user_budget_mode = after.user_budget_mode;
  if (after.user_budget_usd === null) {
    if (before.user_budget_usd !== null) patch.user_budget_usd = null;
  } else if (
    before.user_budget_usd !== after.user_budget_usd ||
    before.user_budget_period !== after.user_budget_period
  ) {
    patch.user_budget_usd = after.user_budget_usd;
    patch.user_budget_period = after.user_budget_period;
  }
  return patch;
}

/** The form field a server message is about: its messages start with the API field's name. */
export function fieldOfMessage(message: string): LimitField | 'general' {
  if (message.startsWith('user_rate_limit_rpm')) return 'userRpm';
  if (message.startsWith('user_budget_')) return 'userBudget';
  if (message.startsWith('allowed_providers')) return 'providers';
  if (message.startsWith('allowed_models')) return 'models';
  if (message.startsWith('rate_limit_rpm') || message.startsWith('rate_limit_scope')) return 'rpm';
  if (message.startsWith('rate_limit_tpm')) return 'tpm';
  if (message.startsWith('max_concurrent')) return 'concurrent';
  if (message.startsWith('budget_')) return 'budget';
  return 'general';
}

export function formatBudget(usd: number): string {
  return Number.isInteger(usd) ? `$${usd.toLocaleString('en-US')}` : `$${usd.toFixed(2)}`;
}

/** The key list's one-liner, e.g. ["OpenAI only", "gpt-4o*", "60 rpm", "$25/month"]; [] without limits. */
export function summarizeLimits(l: KeyLimits): string[] {
  const parts: string[] = [];
  const providers = l.allowed_providers;
  if (providers && providers.length === 1) parts.push(`${providerLabel(providers[0]!)} only`);
  else if (providers) parts.push(providers.map(providerLabel).join(' + '));
  const models = l.allowed_models;
  if (models && models.length <= 2) parts.push(models.join(', '));
  else if (models) parts.push(`${models.slice(0, 2).join(', ')} +${models.length - 2} more`);
  if (l.rate_limit_rpm !== null) parts.push(`${l.rate_limit_rpm.toLocaleString('en-US')} rpm`);
  if (l.rate_limit_tpm !== null) parts.push(`${l.rate_limit_tpm.toLocaleString('en-US')} tpm`);
  if (l.max_concurrent !== null) parts.push(`${l.max_concurrent.toLocaleString('en-US')} at once`);
  if (l.budget_usd !== null)
    parts.push(
      `${formatBudget(l.budget_usd)}/${l.budget_period ?? 'month'}${l.budget_mode === 'hard' ? ' (hard)' : ''}`,
    );
  if (l.user_rate_limit_rpm !== null)
    parts.push(`${l.user_rate_limit_rpm.toLocaleString('en-US')} rpm per end user`);
  if (l.user_budget_usd !== null)
    parts.push(
      `${formatBudget(l.user_budget_usd)}/${l.user_budget_period ?? 'month'} per end user${l.user_budget_mode === 'hard' ? ' (hard)' : ''}`,
    );
  return parts;
}

/** Short labels for keyrelay's own error codes (SPEC errors), for badges in the request log. */
export const ERROR_CODE_LABELS: Record<string, string> = {
  proxy_rate_limited: 'rate limited',
  proxy_budget_exceeded: 'budget exceeded',
  proxy_key_forbidden: 'forbidden',
  proxy_key_revoked: 'revoked',
  proxy_key_expired: 'expired',
  proxy_key_invalid: 'invalid key',
  proxy_key_missing: 'no key',
  proxy_bad_request: 'bad request',
  proxy_unknown_provider: 'unknown provider',
  proxy_body_too_large: 'body too large',
  proxy_upstream_unreachable: 'upstream unreachable',
  proxy_upstream_dropped: 'cut mid-stream',
  proxy_upstream_timeout: 'upstream timeout',
  proxy_unavailable: 'unavailable',
};

/** One sentence on why keyrelay refused, for the request detail page. */
export const ERROR_CODE_EXPLANATIONS: Record<string, string> = {
  proxy_rate_limited:
    'The key reached its requests-per-minute, tokens-per-minute or requests-in-flight limit. Or the end user reached the key’s requests per minute for each end user.',
  proxy_budget_exceeded:
    'The key spent its budget for the current period. Or the end user spent the key’s budget for each end user.',
  proxy_key_forbidden: 'The key may not use this provider or model.',
  proxy_key_revoked: 'The key was revoked.',
  proxy_key_expired: 'The key had expired.',
  proxy_upstream_dropped:
    'The provider closed the connection mid-response; the caller got an incomplete response.',
};

/** A member's limits across their keys in a few words, e.g. "60 rpm · $25/day (hard)"; null without any. */
export function summarizeMemberLimits(l: MemberLimits): string | null {
  const parts: string[] = [];
  if (l.rate_limit_rpm !== null) parts.push(`${l.rate_limit_rpm.toLocaleString('en-US')} rpm`);
  if (l.budget_usd !== null)
    parts.push(
      `${formatBudget(l.budget_usd)}/${l.budget_period ?? 'month'}${l.budget_mode === 'hard' ? ' (hard)' : ''}`,
    );
  return parts.length > 0 ? parts.join(' · ') : null;
}
