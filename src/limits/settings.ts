/**
 * Validation of a key's limits, shared by the console API and the CLI so both answer alike: it throws
 * `invalid_limits`, the message and `details.field` naming the field.
 */
import { domainError, type DomainError } from '../errors.js';
import type { Provider } from '../types.js';
import { providerIds } from '../providers/index.js';
import type {
  BudgetMode,
  BudgetPeriod,
  KeyLimits,
  MemberLimits,
  RpmScope,
  UnpricedPolicy,
} from '../store/types.js';
import { isValidModelPattern, MAX_MODEL_PATTERNS } from './access.js';

export const MAX_RPM = 1_000_000;
export const MAX_TPM = 1_000_000_000;
export const MAX_CONCURRENT = 100_000;
export const MIN_BUDGET_USD = 0.01;
export const MAX_BUDGET_USD = 1_000_000;
const PERIODS: readonly BudgetPeriod[] = ['day', 'month'];
const MODES: readonly BudgetMode[] = ['soft', 'hard'];
const SCOPES: readonly RpmScope[] = ['billable', 'all'];
const UNPRICED: readonly UnpricedPolicy[] = ['refuse', 'allow'];

export const NO_LIMITS: Readonly<KeyLimits> = Object.freeze({
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
});

const LIMIT_FIELDS = Object.keys(NO_LIMITS) as (keyof KeyLimits)[];

/** Just the limit fields of a key (a roll copies them to the new key). */
export function pickLimits(k: KeyLimits): KeyLimits {
  const out = { ...NO_LIMITS } as Record<keyof KeyLimits, unknown>;
  for (const f of LIMIT_FIELDS) out[f] = k[f];
  return out as unknown as KeyLimits;
}

const isBudget = (usd: unknown): boolean =>
  usd === null ||
  (typeof usd === 'number' && Number.isFinite(usd) && usd >= MIN_BUDGET_USD && usd <= MAX_BUDGET_USD);

const invalid = (field: keyof KeyLimits, message: string): DomainError =>
  domainError('invalid_limits', message, { field });

/**
 * The limits after applying `patch` to `current` (null: a new key): a field left out keeps its value, null
 * clears it. A budget without a period gets the current one, else `month`; no budget means no period.
 */
export function mergeKeyLimits(current: KeyLimits | null, patch: Partial<KeyLimits>): KeyLimits {
  const base = current ?? NO_LIMITS;
  const pick = <K extends keyof KeyLimits>(k: K): KeyLimits[K] =>
    patch[k] === undefined ? base[k] : patch[k];
  const providers = pick('allowed_providers');
  const models = pick('allowed_models');
  const rpm = pick('rate_limit_rpm');
  const budget = pick('budget_usd');
  const tpm = pick('rate_limit_tpm');
  const concurrent = pick('max_concurrent');
  const mode = pick('budget_mode') ?? 'soft';
  const scope = pick('rate_limit_scope') ?? 'billable';
  const unpricedCalls = pick('budget_unpriced') ?? 'refuse';
  const userRpm = pick('user_rate_limit_rpm');
  const userBudget = pick('user_budget_usd');
  const userMode = pick('user_budget_mode') ?? 'soft';
  // The built-ins and this deployment's named upstreams (KEYRELAY_UPSTREAMS).
  const known: readonly Provider[] = providerIds();
  if (providers !== null) {
    if (!Array.isArray(providers) || providers.length === 0 || providers.some((p) => !known.includes(p)))
      throw invalid(
        'allowed_providers',
        `allowed_providers must be null or a non-empty list of ${known.map((p) => `"${p}"`).join(', ')}.`,
      );
  }
  if (models !== null) {
    if (!Array.isArray(models) || models.length === 0 || models.length > MAX_MODEL_PATTERNS)
      throw invalid(
        'allowed_models',
        `allowed_models must be null or a list of 1–${MAX_MODEL_PATTERNS} model names.`,
      );
    const bad = models.find((m) => typeof m !== 'string' || !isValidModelPattern(m));
    if (bad !== undefined)
      throw invalid(
        'allowed_models',
        'allowed_models: each entry is an exact model name or a prefix ending in one "*".',
      );
  }
  if (rpm !== null && (!Number.isInteger(rpm) || rpm < 1 || rpm > MAX_RPM))
    throw invalid('rate_limit_rpm', `rate_limit_rpm must be null or an integer 1–${MAX_RPM}.`);
  if (userRpm !== null && (!Number.isInteger(userRpm) || userRpm < 1 || userRpm > MAX_RPM))
    throw invalid('user_rate_limit_rpm', `user_rate_limit_rpm must be null or an integer 1–${MAX_RPM}.`);
  if (!isBudget(budget))
    throw invalid('budget_usd', `budget_usd must be null or ${MIN_BUDGET_USD}–${MAX_BUDGET_USD}.`);
  if (!isBudget(userBudget))
    throw invalid('user_budget_usd', `user_budget_usd must be null or ${MIN_BUDGET_USD}–${MAX_BUDGET_USD}.`);
  if (tpm !== null && (!Number.isInteger(tpm) || tpm < 1 || tpm > MAX_TPM))
    throw invalid('rate_limit_tpm', `rate_limit_tpm must be null or an integer 1–${MAX_TPM}.`);
  if (concurrent !== null && (!Number.isInteger(concurrent) || concurrent < 1 || concurrent > MAX_CONCURRENT))
    throw invalid('max_concurrent', `max_concurrent must be null or an integer 1–${MAX_CONCURRENT}.`);
  if (!MODES.includes(mode)) throw invalid('budget_mode', 'budget_mode must be "soft" or "hard".');
  if (!MODES.includes(userMode))
    throw invalid('user_budget_mode', 'user_budget_mode must be "soft" or "hard".');
  if (!SCOPES.includes(scope))
    throw invalid('rate_limit_scope', 'rate_limit_scope must be "billable" or "all".');
  if (!UNPRICED.includes(unpricedCalls))
    throw invalid('budget_unpriced', 'budget_unpriced must be "refuse" or "allow".');
  let period: BudgetPeriod | null = null;
  if (budget !== null) {
    period = patch.budget_period ?? base.budget_period ?? 'month';
    if (!PERIODS.includes(period)) throw invalid('budget_period', 'budget_period must be "day" or "month".');
  } else if (patch.budget_period != null) {
    throw invalid('budget_period', 'budget_period needs a budget_usd.');
  }
  let userPeriod: BudgetPeriod | null = null;
  if (userBudget !== null) {
    userPeriod = patch.user_budget_period ?? base.user_budget_period ?? 'month';
    if (!PERIODS.includes(userPeriod))
      throw invalid('user_budget_period', 'user_budget_period must be "day" or "month".');
  } else if (patch.user_budget_period != null) {
    throw invalid('user_budget_period', 'user_budget_period needs a user_budget_usd.');
  }
  return {
    // Canonical order and no duplicates, so equal settings compare equal.
    allowed_providers: providers && known.filter((p) => providers.includes(p)),
    allowed_models: models && [...new Set(models)],
    rate_limit_rpm: rpm,
    budget_usd: budget,
    budget_period: period,
    budget_mode: mode,
    rate_limit_tpm: tpm,
    max_concurrent: concurrent,
    rate_limit_scope: scope,
    budget_unpriced: unpricedCalls,
    user_rate_limit_rpm: userRpm,
    user_budget_usd: userBudget,
    user_budget_period: userPeriod,
    user_budget_mode: userMode,
  };
}

/** The fields a member's limits have (members.ts), each validated and merged as a key's of that name. */
export const MEMBER_LIMIT_FIELDS = ['rate_limit_rpm', 'budget_usd', 'budget_period', 'budget_mode'] as const;

/** A member's limits after applying `patch` to `current`, by mergeKeyLimits' rules and messages. */
export function mergeMemberLimits(current: MemberLimits | null, patch: Partial<MemberLimits>): MemberLimits {
  const own: Partial<KeyLimits> = {};
  for (const f of MEMBER_LIMIT_FIELDS) if (patch[f] !== undefined) Object.assign(own, { [f]: patch[f] });
  const merged = mergeKeyLimits(current && { ...NO_LIMITS, ...current }, own);
  return {
    rate_limit_rpm: merged.rate_limit_rpm,
    budget_usd: merged.budget_usd,
    budget_period: merged.budget_period,
    budget_mode: merged.budget_mode,
  };
}
