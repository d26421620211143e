/**
 * Every column of keys whose change reaches the other instances' key caches. Migrations 12, 13 and 17 each
 * add some of them; a database meets them in version order (a fresh one) or in the order they shipped (one
 * that had 13 before 12 existed), so each remakes the trigger once all of them exist, and the last one to
 * run makes it whole.
 */
export const KEYS_TRIGGER_COLUMNS: readonly string[] = [
  'name',
  'expires_at',
  'revoked_at',
  'allowed_providers',
  'allowed_models',
  'rate_limit_rpm',
  'budget_usd',
  'budget_period',
  'budget_mode',
  'rate_limit_tpm',
  'max_concurrent',
  'rate_limit_scope',
  'account_id',
  'org_id',
  'budget_unpriced',
  'service',
  'user_rate_limit_rpm',
  'user_budget_usd',
  'user_budget_period',
  'user_budget_mode',
];
