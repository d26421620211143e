/**
 * The registry: every provider keyrelay proxies, by id (ids.ts) and by route segment, and the endpoint
 * table lookup. The built-ins are always there; named upstreams (upstreams.ts) are added once at start.
 * Adding a provider: docs/ARCHITECTURE.md, "How to add a provider or an endpoint".
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { ProxyError } from '../errors.js';
import { anthropic } from './anthropic/index.js';
import type { BuiltinProvider, Provider } from './ids.js';
import { openai } from './openai/index.js';
import type { Endpoint, ProviderModule } from './types.js';
import type { NamedUpstream } from './upstream-config.js';
import { upstreamModule } from './upstreams.js';

export { BUILTIN_PROVIDER_IDS, PROVIDER_NAME, type Provider } from './ids.js';
export { parseUpstreams, type NamedUpstream } from './upstream-config.js';

export type {
  BatchCall,
  BatchObject,
  BatchSupport,
  Endpoint,
  EndpointClass,
  ProviderModule,
  SocketEvents,
  SocketProtocol,
} from './types.js';

/** One module for each built-in id, under that id: a missing or extra module does not compile. */
export const BUILTIN_PROVIDERS: Readonly<{ [P in BuiltinProvider]: ProviderModule<P> }> = {
  openai,
  anthropic,
};

interface Entry {
  module: ProviderModule;
  table: { match: RegExp; endpoint: Endpoint }[];
}

const entries = new Map<Provider, Entry>();

function add(m: ProviderModule): void {
  entries.set(m.id, {
    module: m,
    table: m.endpoints.map((row) => ({
      match: row.match,
      endpoint: { class: row.class, usage: row.usage, injectStreamUsage: row.injectStreamUsage === true },
    })),
  });
}

for (const m of Object.values(BUILTIN_PROVIDERS)) add(m);

/**
 * Adds the named upstreams (the configuration's, at start: the server and the CLI). A process serves one
 * configuration; a name registered again takes its new definition (tests start servers one after another).
 */
export function registerUpstreams(upstreams: readonly NamedUpstream[]): void {
  for (const u of upstreams) add(upstreamModule(u));
}

/** Every provider id: the built-ins', then the named upstreams' in the order configured. */
export function providerIds(): readonly Provider[] {
  return [...entries.keys()];
}

/** The module of a provider id the registry holds (route resolution hands out no other). */
export function providerModule(provider: Provider): ProviderModule {
  const e = entries.get(provider);
  if (!e) throw new RangeError(`unknown provider ${JSON.stringify(provider)}`);
  return e.module;
}

/** The provider a route segment names (/api/proxy/<route>/…), or undefined. */
export function providerByRoute(route: string): ProviderModule | undefined {
  // Every module's route is its id.
  return entries.get(route)?.module;
}

const OTHER: Endpoint = { class: 'other', usage: null, injectStreamUsage: false };

/** What kind of call an upstream path (without its query) is, by the provider's endpoint table. */
export function endpointOf(provider: Provider, path: string): Endpoint {
  let end = path.length;
  while (end > 1 && path.charCodeAt(end - 1) === 0x2f) end--;
  const p = end === path.length ? path : path.slice(0, end);
  const table = entries.get(provider)?.table;
  if (table) for (const row of table) if (row.match.test(p)) return row.endpoint;
  return OTHER;
}

/** The provider credential as sent, for fingerprinting only (never logged). */
export function providerCredential(provider: Provider, headers: IncomingHttpHeaders): string | null {
  for (const name of providerModule(provider).credentialHeaders) {
    const v = headers[name];
    if (typeof v !== 'string' || !v) continue;
    return name === 'authorization' ? v.replace(/^Bearer\s+/i, '') : v;
  }
  return null;
}

/** The body keyrelay sends for its own error, shaped like the provider's (unknown provider → OpenAI shape). */
export function renderProxyError(provider: Provider | null, err: ProxyError): string {
  return (entries.get(provider ?? 'openai')?.module ?? openai).errorBody(err);
}
