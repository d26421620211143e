import { ApiError } from '../errors.js';

/**
 * Thrown by createAccount when the email's unique index refuses the row, so two signups racing past the
 * route's "already exists?" check still end in the documented 409.
 */
export function emailTakenError(): ApiError {
  return new ApiError(409, 'email_taken', 'An account with this email already exists.');
}

export function isEmailTaken(err: unknown): boolean {
  return err instanceof ApiError && err.code === 'email_taken';
}

export function normalizeStoredEmail(email: string): string {
  return email.trim().toLowerCase();
}
