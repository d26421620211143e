/** Creates an account and its `default` key; the full key is returned once (SPEC §3). */
import { ApiError } from '../errors.js';
import { newId } from '../ids.js';
import { createKey, type CreatedKey, type KeyDeps } from '../keys/actions.js';
import type { Account } from '../store/types.js';
import { hashPassword, validatePassword } from './password.js';

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

export async function createAccount(
  deps: KeyDeps,
  input: { email: string; password: string },
): Promise<{ account: Account; key: CreatedKey }> {
  const email = normalizeEmail(input.email);
  if (!EMAIL.test(email) || email.length > 254) throw new ApiError(400, 'invalid_email', 'Enter a valid email address.');
  const problem = validatePassword(input.password);
  if (problem) throw new ApiError(400, 'weak_password', problem);
  if (await deps.store.getAccountByEmail(email)) {
    throw new ApiError(409, 'email_taken', 'An account with this email already exists.');
  }
  const account = await deps.store.createAccount({
    id: newId(),
    email,
    password_hash: await hashPassword(input.password),
  });
  const key = await createKey(deps, { accountId: account.id, name: 'default' });
  return { account, key };
}
