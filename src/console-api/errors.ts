/**
 * The console API's errors: one table of stable codes and their statuses, listed in docs/console-api.md
 * ("Errors"; `errors.test.ts` fails if the two drift). Code throws by code (`consoleError`), never a bare
 * status; the store's domain errors are mapped here, at the edge (`fromDomainError`).
 */
import { ApiError } from '../errors.js';
import { EmailTakenError, InvalidFilterError } from '../store/errors.js';

export const CONSOLE_ERRORS = {
  invalid_request: { status: 400, message: 'Malformed request.' },
  invalid_email: { status: 400, message: 'Enter a valid email address.' },
  weak_password: { status: 400, message: 'Password is too weak.' },
  wrong_password: { status: 400, message: 'Current password is incorrect.' },
  invalid_name: { status: 400, message: 'Key name must be 1–100 characters.' },
  invalid_expiry: { status: 400, message: 'expires_at must be in the future.' },
  invalid_grace: { status: 400, message: 'Grace period must be 0–86400 seconds.' },
  invalid_limits: { status: 400, message: 'Invalid key limits.' },
  invalid_range: { status: 400, message: '`from` must be before `to`.' },
  range_too_large: { status: 400, message: 'Too many buckets; pick a coarser bucket.' },
  invalid_time: { status: 400, message: 'Not an ISO-8601 time.' },
  invalid_cursor: { status: 400, message: 'Invalid cursor.' },
  not_authenticated: { status: 401, message: 'Log in to continue.' },
  invalid_credentials: { status: 401, message: 'Email or password is incorrect.' },
  cross_site: { status: 403, message: 'Cross-site request refused.' },
  signup_closed: { status: 403, message: 'Sign-up is closed.' },
  not_found: { status: 404, message: 'No such endpoint.' },
  key_not_found: { status: 404, message: 'No such key.' },
  request_not_found: { status: 404, message: 'No such request.' },
  email_taken: { status: 409, message: 'An account with this email already exists.' },
  key_not_active: { status: 409, message: 'Only an active key can be rolled.' },
  payload_too_large: { status: 413, message: 'Request body too large.' },
  unsupported_media_type: { status: 415, message: 'Send the body as application/json.' },
  too_many_attempts: { status: 429, message: 'Too many attempts. Try again later.' },
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

/** A store's domain error as the console answers it; undefined for anything else. */
export function fromDomainError(err: unknown): ApiError | undefined {
  if (err instanceof EmailTakenError) return consoleError('email_taken');
  if (err instanceof InvalidFilterError) return consoleError(err.code, err.message);
  return undefined;
}
