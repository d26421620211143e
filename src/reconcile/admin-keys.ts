/**
 * The providers' organization admin keys (OPENAI_ADMIN_KEY, ANTHROPIC_ADMIN_KEY: the providers' own names
 * for them), read from the environment by config.ts and held only here. An admin key reads the whole
 * provider organization's bill, so it is never stored, logged or answered: the key sits in a closure, and
 * the holder prints, serialises and inspects as which providers have one, never as the key.
 */
import { inspect } from 'node:util';

/** The providers whose cost report keyrelay can read, with the variable each one's admin key comes from. */
export const ADMIN_KEY_VARIABLES = { openai: 'OPENAI_ADMIN_KEY', anthropic: 'ANTHROPIC_ADMIN_KEY' } as const;
export type BillingProvider = keyof typeof ADMIN_KEY_VARIABLES;
export const BILLING_PROVIDERS = Object.keys(ADMIN_KEY_VARIABLES) as BillingProvider[];

export interface AdminKeys {
  /** The providers with a key, in BILLING_PROVIDERS' order. */
  readonly configured: readonly BillingProvider[];
  /** Hands the key to `use` (the one request that sends it); undefined when none is configured. */
  withKey<T>(provider: BillingProvider, use: (key: string) => T): T | undefined;
  /** Removes every configured key from a text before it leaves the process (an error message, say). */
  redact(text: string): string;
}

export function adminKeysFrom(env: Record<string, string | undefined>): AdminKeys {
  const keys = new Map<BillingProvider, string>();
  for (const p of BILLING_PROVIDERS) {
    const v = env[ADMIN_KEY_VARIABLES[p]]?.trim();
    if (v) keys.set(p, v);
  }
  const configured = BILLING_PROVIDERS.filter((p) => keys.has(p));
  const shown = () => ({ configured });
  return Object.freeze({
    configured,
    withKey<T>(provider: BillingProvider, use: (key: string) => T): T | undefined {
      const key = keys.get(provider);
      return key === undefined ? undefined : use(key);
    },
    redact(text: string): string {
      let out = text;
      for (const key of keys.values()) out = out.split(key).join('[admin key]');
      return out;
    },
    toJSON: shown,
    [inspect.custom]: shown,
  });
}
