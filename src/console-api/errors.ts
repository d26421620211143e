/**
 * The console API's errors: one table of stable codes and their statuses, listed in docs/console-api.md
 * ("Errors"; `errors.test.ts` fails if the two drift). Code throws by code (`consoleError`), never a bare
 * status; the domain's errors (keys/, accounts/, limits/, store/) are mapped here, at the edge
 * (`fromDomainError`): every domain code is one of this table's, or this file does not compile.
 */
import { ApiError, DOMAIN_ERRORS, isDomainError } from '../errors.js';

export const CONSOLE_ERRORS = {
  invalid_request: { status: 400, message: 'Malformed request.' },
  invalid_email: { status: 400, message: DOMAIN_ERRORS.invalid_email },
  weak_password: { status: 400, message: DOMAIN_ERRORS.weak_password },
  wrong_password: { status: 400, message: 'Current password is incorrect.' },
  invalid_name: { status: 400, message: DOMAIN_ERRORS.invalid_name },
  invalid_expiry: { status: 400, message: 'expires_at must be in the future.' },
  invalid_grace: { status: 400, message: DOMAIN_ERRORS.invalid_grace },
  invalid_limits: { status: 400, message: DOMAIN_ERRORS.invalid_limits },
  invalid_range: { status: 400, message: '`from` must be before `to`.' },
  range_too_large: { status: 400, message: 'Too many buckets; pick a coarser bucket.' },
  invalid_time: { status: 400, message: DOMAIN_ERRORS.invalid_time },
  invalid_org_name: { status: 400, message: DOMAIN_ERRORS.invalid_org_name },
  invalid_cursor: { status: 400, message: DOMAIN_ERRORS.invalid_cursor },
  invalid_sso: { status: 400, message: DOMAIN_ERRORS.invalid_sso },
  invalid_sort: { status: 400, message: DOMAIN_ERRORS.invalid_sort },
  invalid_alert_rule: { status: 400, message: DOMAIN_ERRORS.invalid_alert_rule },
  alert_target_refused: { status: 400, message: DOMAIN_ERRORS.alert_target_refused },
  not_authenticated: { status: 401, message: 'Log in to continue.' },
  token_invalid: { status: 401, message: 'This API token is unknown or revoked.' },
  invalid_credentials: { status: 401, message: 'Email or password is incorrect.' },
  cross_site: { status: 403, message: 'Cross-site request refused.' },
  token_read_only: { status: 403, message: 'API tokens only read; sign in to the console to make changes.' },
  token_scope: { status: 403, message: 'This API token may not read this.' },
  sso_required: {
    status: 403,
    message: 'Your organization signs in with single sign-on; use "Sign in with SSO".',
  },
  signup_closed: { status: 403, message: DOMAIN_ERRORS.signup_closed },
  forbidden: { status: 403, message: DOMAIN_ERRORS.forbidden },
  not_found: { status: 404, message: 'No such endpoint.' },
  key_not_found: { status: 404, message: DOMAIN_ERRORS.key_not_found },
  sso_not_configured: { status: 404, message: 'No single sign-on is set up for this email domain.' },
  token_not_found: { status: 404, message: 'No such API token.' },
  request_not_found: { status: 404, message: 'No such request.' },
  session_not_found: { status: 404, message: 'No such session in what you can see.' },
  org_not_found: { status: 404, message: DOMAIN_ERRORS.org_not_found },
  member_not_found: { status: 404, message: DOMAIN_ERRORS.member_not_found },
  alert_rule_not_found: { status: 404, message: DOMAIN_ERRORS.alert_rule_not_found },
  invite_invalid: { status: 410, message: DOMAIN_ERRORS.invite_invalid },
  email_taken: { status: 409, message: DOMAIN_ERRORS.email_taken },
  key_not_active: { status: 409, message: DOMAIN_ERRORS.key_not_active },
  sso_domain_taken: { status: 409, message: DOMAIN_ERRORS.sso_domain_taken },
  already_member: { status: 409, message: DOMAIN_ERRORS.already_member },
  last_owner: { status: 409, message: DOMAIN_ERRORS.last_owner },
  payload_too_large: { status: 413, message: 'Request body too large.' },
  unsupported_media_type: { status: 415, message: 'Send the body as application/json.' },
  too_many_attempts: { status: 429, message: 'Too many attempts. Try again later.' },
  sso_unavailable: { status: 502, message: DOMAIN_ERRORS.sso_unavailable },
  internal_error: { status: 500, message: 'Internal error.' },
} as const satisfies Record<string, { status: number; message: string }>;

export type ConsoleErrorCode = keyof typeof CONSOLE_ERRORS;

/** The error for `code`, its status from the table; `message` replaces the table's when it says more. */
export function consoleError(code: ConsoleErrorCode, message?: string, retryAfterSeconds?: number): ApiError {
  return new ApiError(
    CONSOLE_ERRORS[code].status,
    code,
    message ?? CONSOLE_ERRORS[code].message,
    retryAfterSeconds,
  );
}

/** A domain error as the console answers it; undefined for anything else. */
export function fromDomainError(err: unknown): ApiError | undefined {
  return isDomainError(err) ? consoleError(err.code, err.message) : undefined;
}
