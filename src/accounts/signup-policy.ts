/**
 * Who may sign up through the console. KEYRELAY_SIGNUP is the operator's bound; the install's owner (its first
 * account) may make it stricter in the console, never looser: the stricter of the two applies.
 */
import type { Config } from '../config.js';
import type { ConfigStore } from '../store/types.js';
import { FIRST_ACCOUNT_MARKER } from './create-account.js';

export type SignupMode = Config['signup'];
const ORDER: readonly SignupMode[] = ['open', 'invite', 'closed'];
const SETTING = 'signup_policy';
const NO_OWNER = '(none)';

export function isSignupMode(v: string): v is SignupMode {
  return (ORDER as readonly string[]).includes(v);
}

/** The console's choice, or null when the owner never set one. */
export async function consoleSignupMode(store: ConfigStore): Promise<SignupMode | null> {
  const v = await store.getSetting(SETTING);
  return v !== null && isSignupMode(v) ? v : null;
}

export async function setConsoleSignupMode(store: ConfigStore, mode: SignupMode): Promise<void> {
  await store.setSetting(SETTING, mode);
}

/** What applies now: the stricter of the configuration and the console's choice. */
export async function effectiveSignupMode(
  config: Pick<Config, 'signup'>,
  store: ConfigStore,
): Promise<SignupMode> {
  const chosen = await consoleSignupMode(store);
  if (chosen === null) return config.signup;
  return ORDER[Math.max(ORDER.indexOf(config.signup), ORDER.indexOf(chosen))]!;
}

/** The install's owner (its first account), or null before any account exists. */
export async function installOwnerId(store: ConfigStore): Promise<string | null> {
  if (!(await store.hasAccounts())) return null;
  const id = await store.ensureSecret(FIRST_ACCOUNT_MARKER, NO_OWNER);
  return id === NO_OWNER ? null : id;
}

/** Whether the account is the install's owner: its first account. */
export async function isInstallOwner(store: ConfigStore, accountId: string): Promise<boolean> {
  // Read only once an account exists: the marker is claimed at the first creation. Read by inserting a value
  // no account id has, so a database without the marker fails closed (nobody is owner), never to the caller.
  if (!(await store.hasAccounts())) return false;
  return (await store.ensureSecret(FIRST_ACCOUNT_MARKER, NO_OWNER)) === accountId;
}
