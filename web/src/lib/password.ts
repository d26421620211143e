/**
 * The server's password rule (src/accounts/password.ts), with its numbers from /api/console/info: spaces at
 * either end do not count towards the minimum; the maximum counts every character. Checked as the user
 * types, so a form never cuts a passphrase short or sends one the server refuses.
 */
export function passwordProblem(
  password: string,
  rule: { min_length: number; max_length: number },
): string | null {
  if (password === '') return null;
  if (password.length > rule.max_length)
    return `At most ${rule.max_length} characters; this one has ${password.length}.`;
  if (password.trim().length < rule.min_length)
    return `At least ${rule.min_length} characters, not counting spaces at either end.`;
  return null;
}
