/** Creates an account and its `default` key; the full key is returned once and never again (only its hash is kept). */
import { domainError } from '../errors.js';
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

/** Marks that an account's `default` key was issued (by creation here, or at first sign-in: sign-up.ts). */
export const DEFAULT_KEY_MARKER = (accountId: string) => `default_key_issued:${accountId}`;

/** The normalised email, or `invalid_email` / `weak_password` (answers that depend on the input only). */
export function checkSignupInput(input: { email: string; password: string }): string {
  const email = normalizeEmail(input.email);
  if (!EMAIL.test(email) || email.length > 254) throw domainError('invalid_email');
  const problem = validatePassword(input.password);
  if (problem) throw domainError('weak_password', problem);
  return email;
}

/** "invite" sign-up: only the request that claims the very first account may go on. */
export async function claimBootstrap(deps: KeyDeps, id: string): Promise<void> {
  // Claimed only after validation, so a typo does not burn the bootstrap.
  if ((await deps.store.ensureSecret(FIRST_ACCOUNT_MARKER, id)) !== id) {
    throw domainError('signup_closed', 'Sign-up is by invitation only.');
  }
}

/** An account with its default key at once: the CLI's `users create` (the console signs up via sign-up.ts). */
export async function createAccount(
  deps: KeyDeps,
  input: { email: string; password: string },
  opts: { onlyIfFirst?: boolean } = {},
): Promise<{ account: Account; key: CreatedKey }> {
  const email = checkSignupInput(input);
  const id = newId();
  if (opts.onlyIfFirst) await claimBootstrap(deps, id);
  if (await deps.store.getAccountByEmail(email)) {
    throw domainError('email_taken');
  }
  const account = await deps.store.createAccount({
    id,
    email,
    password_hash: await hashPassword(input.password),
  });
  await deps.store.ensureSecret(FIRST_ACCOUNT_MARKER, account.id);
  await deps.store.ensureSecret(DEFAULT_KEY_MARKER(account.id), account.id);
  const key = await createKey(deps, { accountId: account.id, name: 'default' });
  return { account, key };
}
