import type { Config } from '../../src/config.js';

/** Internal values no variable sets, by configuration field; a group (guard, ws, limits…) in part. */
export type Tuning = {
  [K in keyof Config]?: NonNullable<Config[K]> extends object ? Partial<NonNullable<Config[K]>> : Config[K];
};

/** `tuning` merged over a loaded configuration one level deep (a group keeps the fields it does not name). */
export function tuned(config: Readonly<Config>, tuning: Tuning = {}): Readonly<Config> {
  const merged: Record<string, unknown> = { ...config };
  for (const [k, v] of Object.entries(tuning)) {
    const base = merged[k];
    merged[k] = v && typeof v === 'object' && base && typeof base === 'object' ? { ...base, ...v } : v;
  }
  return merged as unknown as Readonly<Config>;
}
