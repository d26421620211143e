/**
 * The providers keyrelay proxies, by id. The built-ins are listed here; named upstreams
 * (KEYRELAY_UPSTREAMS, upstreams.ts) add ids at start, each a name of this shape. It sits apart from the
 * modules so that the stores (the SQLite log writer's thread among them) can check a row's provider without
 * loading the usage readers and the price library: 2.5 MB of heap per thread.
 */
export const BUILTIN_PROVIDER_IDS = ['openai', 'anthropic'] as const;

export type BuiltinProvider = (typeof BUILTIN_PROVIDER_IDS)[number];

/** A provider's id: a built-in's, or a named upstream's. */
export type Provider = string;

/** What a provider id may be: a route segment, and a value rows and key allowlists carry. */
export const PROVIDER_NAME = /^[a-z][a-z0-9-]{0,31}$/;

export function isBuiltinProvider(id: string): id is BuiltinProvider {
  return (BUILTIN_PROVIDER_IDS as readonly string[]).includes(id);
}
