/**
 * Console sign-up that tells nobody whether an address already has an account: the answer, and the work
 * behind it (one password hash, one insert), are the same either way. The account's default key is
 * therefore not handed out by sign-up but at the account's first sign-in, and the owner of an existing
 * account learns of the attempt there too (no email sender is configured; docs/console-api.md).
 */
import { newId } from '../ids.js';
import { createKey, type CreatedKey, type KeyDeps } from '../keys/actions.js';
import { isDomainError } from '../errors.js';
import {
  checkSignupInput,
  claimBootstrap,
  DEFAULT_KEY_MARKER,
  FIRST_ACCOUNT_MARKER,
} from './create-account.js';
import { hashPassword } from './password.js';

export interface SignupNotice {
  kind: 'signup_attempt';
  /** When someone tried to sign up with this account's address. */
  at: string;
  /** From where (the client IP as the console sees it). */
  ip: string;
}

const noticePrefix = (accountId: string) => `notice:signup:${accountId}:`;

export async function signUp(
  deps: KeyDeps,
  input: { email: string; password: string },
  opts: { onlyIfFirst?: boolean; ip: string; now?: Date },
): Promise<{ created: boolean }> {
  const email = checkSignupInput(input);
  const id = newId();
  if (opts.onlyIfFirst) await claimBootstrap(deps, id);
  const existing = await deps.store.getAccountByEmail(email);
  // Paid on both paths: it is most of the time a new account takes.
  const passwordHash = await hashPassword(input.password);
  let ownerId = existing?.id ?? null;
  if (!ownerId) {
    try {
      await deps.store.createAccount({ id, email, password_hash: passwordHash });
      await deps.store.ensureSecret(FIRST_ACCOUNT_MARKER, id);
      return { created: true };
    } catch (err) {
      if (!isDomainError(err) || err.code !== 'email_taken') throw err;
      ownerId = (await deps.store.getAccountByEmail(email))?.id ?? null; // lost a race to the same address
      if (!ownerId) throw err;
    }
  }
  const at = (opts.now ?? new Date()).toISOString();
  await deps.store.ensureSecret(`${noticePrefix(ownerId)}${newId()}`, JSON.stringify({ at, ip: opts.ip }));
  return { created: false };
}

/** Notices not yet shown to the account, oldest first; each is shown once. */
export async function takeSignupNotices(deps: KeyDeps, accountId: string): Promise<SignupNotice[]> {
  const entries = await deps.store.takeSecrets(noticePrefix(accountId));
  return entries.flatMap(({ value }) => {
    try {
      const v = JSON.parse(value) as { at?: unknown; ip?: unknown };
      return typeof v.at === 'string'
        ? [{ kind: 'signup_attempt' as const, at: v.at, ip: typeof v.ip === 'string' ? v.ip : '' }]
        : [];
    } catch {
      return [];
    }
  });
}

/**
 * The account's `default` key, created and returned (full, once) at its first sign-in: only for an account
 * that has no key and never had one issued this way (the marker is claimed atomically: one sign-in wins).
 */
export async function issueFirstKey(deps: KeyDeps, accountId: string): Promise<CreatedKey | null> {
  if ((await deps.store.listKeys(accountId)).length > 0) return null;
  const claim = newId();
  if ((await deps.store.ensureSecret(DEFAULT_KEY_MARKER(accountId), claim)) !== claim) return null;
  return createKey(deps, { accountId, name: 'default' });
}
