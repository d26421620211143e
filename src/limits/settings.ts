/**
 * Validation of a key's limits, shared by the console API and the CLI so both answer alike
 * (400 `invalid_limits`, the message naming the field).
 */
import { ApiError } from '../errors.js';
import type { Provider } from '../types.js';
import { PROVIDER_IDS } from '../providers/index.js';
import type { BudgetMode, BudgetPeriod, KeyLimits, RpmScope } from '../store/types.js';
import { isValidModelPattern, MAX_MODEL_PATTERNS } from './access.js';

export const MAX_RPM = 1_000_000;
export const MAX_TPM = 1_000_000_000;
export const MAX_CONCURRENT = 100_000;
export const MIN_BUDGET_USD = 0.01;
export const MAX_BUDGET_USD = 1_000_000;
const PROVIDERS: readonly Provider[] = PROVIDER_IDS;
const PERIODS: readonly BudgetPeriod[] = ['day', 'month'];
const MODES: readonly BudgetMode[] = ['soft', 'hard'];
const SCOPES: readonly RpmScope[] = ['billable', 'all'];

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
});

const LIMIT_FIELDS = Object.keys(NO_LIMITS) as (keyof KeyLimits)[];

/** Just the limit fields of a key (a roll copies them to the new key). */
export function pickLimits(k: KeyLimits): KeyLimits {
  const out = { ...NO_LIMITS } as Record<keyof KeyLimits, unknown>;
  for (const f of LIMIT_FIELDS) out[f] = k[f];
  return out as unknown as KeyLimits;
}

const invalid = (message: string) => new ApiError(400, 'invalid_limits', message);

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
  if (providers !== null) {
    if (!Array.isArray(providers) || providers.length === 0 || providers.some((p) => !PROVIDERS.includes(p)))
      throw invalid(
        `allowed_providers must be null or a non-empty list of ${PROVIDERS.map((p) => `"${p}"`).join(', ')}.`,
      );
  }
  if (models !== null) {
    if (!Array.isArray(models) || models.length === 0 || models.length > MAX_MODEL_PATTERNS)
      throw invalid(`allowed_models must be null or a list of 1–${MAX_MODEL_PATTERNS} model names.`);
    const bad = models.find((m) => typeof m !== 'string' || !isValidModelPattern(m));
    if (bad !== undefined)
      throw invalid('allowed_models: each entry is an exact model name or a prefix ending in one "*".');
  }
  if (rpm !== null && (!Number.isInteger(rpm) || rpm < 1 || rpm > MAX_RPM))
    throw invalid(`rate_limit_rpm must be null or an integer 1–${MAX_RPM}.`);
  if (
    budget !== null &&
    (typeof budget !== 'number' ||
      !Number.isFinite(budget) ||
      budget < MIN_BUDGET_USD ||
      budget > MAX_BUDGET_USD)
  ) {
    throw invalid(`budget_usd must be null or ${MIN_BUDGET_USD}–${MAX_BUDGET_USD}.`);
  }
  if (tpm !== null && (!Number.isInteger(tpm) || tpm < 1 || tpm > MAX_TPM))
    throw invalid(`rate_limit_tpm must be null or an integer 1–${MAX_TPM}.`);
  if (concurrent !== null && (!Number.isInteger(concurrent) || concurrent < 1 || concurrent > MAX_CONCURRENT))
    throw invalid(`max_concurrent must be null or an integer 1–${MAX_CONCURRENT}.`);
  if (!MODES.includes(mode)) throw invalid('budget_mode must be "soft" or "hard".');
  if (!SCOPES.includes(scope)) throw invalid('rate_limit_scope must be "billable" or "all".');
  let period: BudgetPeriod | null = null;
  if (budget !== null) {
    period = patch.budget_period ?? base.budget_period ?? 'month';
    if (!PERIODS.includes(period)) throw invalid('budget_period must be "day" or "month".');
  } else if (patch.budget_period != null) {
    throw invalid('budget_period needs a budget_usd.');
  }
  return {
    // Canonical order and no duplicates, so equal settings compare equal.
    allowed_providers: providers && PROVIDERS.filter((p) => providers.includes(p)),
    allowed_models: models && [...new Set(models)],
    rate_limit_rpm: rpm,
    budget_usd: budget,
    budget_period: period,
    budget_mode: mode,
    rate_limit_tpm: tpm,
    max_concurrent: concurrent,
    rate_limit_scope: scope,
  };
}
