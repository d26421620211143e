/** Creates an account and its `default` key; the full key is returned once (SPEC §3). */
import { ApiError } from '../errors.js';
import { newId } from '../ids.js';
import { createKey, type CreatedKey, type KeyDeps } from '../keys/actions.js';
import type { Account } from '../store/types.js';
import { hashPassword, validatePassword } from './password.js';

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/**
 * Set (insert-if-absent, via ConfigStore.ensureSecret) to the id of the first account ever created. Every
 * account creation sets it, CLI included, so "invite" signup's bootstrap exception (the very first account
 * may sign up) is claimed atomically by exactly one request and never reopens once anyone exists.
 */
export const FIRST_ACCOUNT_MARKER = 'first_account_id';

export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

export async function createAccount(
  deps: KeyDeps,
  input: { email: string; password: string },
  opts: { onlyIfFirst?: boolean } = {},
): Promise<{ account: Account; key: CreatedKey }> {
  const email = normalizeEmail(input.email);
  if (!EMAIL.test(email) || email.length > 254)
    throw new ApiError(400, 'invalid_email', 'Enter a valid email address.');
  const problem = validatePassword(input.password);
  if (problem) throw new ApiError(400, 'weak_password', problem);
  const id = newId();
  // Claimed only after validation, so a typo does not burn the bootstrap.
  if (opts.onlyIfFirst && (await deps.store.ensureSecret(FIRST_ACCOUNT_MARKER, id)) !== id) {
    throw new ApiError(403, 'signup_closed', 'Sign-up is by invitation only.');
  }
  if (await deps.store.getAccountByEmail(email)) {
    throw new ApiError(409, 'email_taken', 'An account with this email already exists.');
  }
  const account = await deps.store.createAccount({
    id,
    email,
    password_hash: await hashPassword(input.password),
  });
  await deps.store.ensureSecret(FIRST_ACCOUNT_MARKER, account.id);
  const key = await createKey(deps, { accountId: account.id, name: 'default' });
  return { account, key };
}
