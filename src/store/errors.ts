/**
 * What a store refuses, as domain errors: no HTTP status here. The console API's edge maps them to its error
 * table (`console-api/errors.ts`); the CLI reports them as usage errors where the input was the caller's.
 */

/** createAccount: the email's unique index refused the row (two sign-ups racing to one address). */
export class EmailTakenError extends Error {
  override name = 'EmailTakenError';
  readonly code = 'email_taken';
  constructor() {
    super('An account with this email already exists.');
  }
}

/** A request-log filter the store cannot use: a time it cannot read, or a cursor it did not issue. */
export class InvalidFilterError extends Error {
  override name = 'InvalidFilterError';
  constructor(
    readonly code: 'invalid_time' | 'invalid_cursor',
    message: string,
  ) {
    super(message);
  }
}

export function normalizeStoredEmail(email: string): string {
  return email.trim().toLowerCase();
}
