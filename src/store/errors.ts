/**
 * What a store refuses, as domain errors (src/errors.ts, no HTTP status): `email_taken` when createAccount's
 * unique index refuses the row (two sign-ups racing to one address), `invalid_time` / `invalid_cursor` for
 * a request-log filter it cannot use. The console API's edge maps them to its error table
 * (`console-api/errors.ts`), the CLI to an exit code.
 */

export function normalizeStoredEmail(email: string): string {
  return email.trim().toLowerCase();
}
