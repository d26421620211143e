/**
 * The registry: every provider keyrelay proxies, by id and by route segment, and the endpoint table
 * lookup. Adding a provider: docs/ARCHITECTURE.md, "How to add a provider or an endpoint".
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Provider } from '../types.js';
import { anthropic } from './anthropic/index.js';
import { openai } from './openai/index.js';
import type { Endpoint, ProviderModule } from './types.js';

export type { Endpoint, EndpointClass, ProviderModule, SocketEvents, SocketProtocol } from './types.js';

export const PROVIDERS: Readonly<Record<Provider, ProviderModule>> = { openai, anthropic };
export const PROVIDER_IDS = Object.keys(PROVIDERS) as readonly Provider[];

const BY_ROUTE = new Map<string, ProviderModule>(Object.values(PROVIDERS).map((m) => [m.route, m]));

/** The provider a route segment names (/api/proxy/<route>/…), or undefined. */
export function providerByRoute(route: string): ProviderModule | undefined {
  return BY_ROUTE.get(route);
}

const OTHER: Endpoint = { class: 'other', usage: null, injectStreamUsage: false };

const TABLES = Object.fromEntries(
  Object.values(PROVIDERS).map((m) => [
    m.id,
    m.endpoints.map((row) => ({
      match: row.match,
      endpoint: { class: row.class, usage: row.usage, injectStreamUsage: row.injectStreamUsage === true },
    })),
  ]),
) as Record<Provider, { match: RegExp; endpoint: Endpoint }[]>;

/** What kind of call an upstream path (without its query) is, by the provider's endpoint table. */
export function endpointOf(provider: Provider, path: string): Endpoint {
  let end = path.length;
  while (end > 1 && path.charCodeAt(end - 1) === 0x2f) end--;
  const p = end === path.length ? path : path.slice(0, end);
  for (const row of TABLES[provider]) if (row.match.test(p)) return row.endpoint;
  return OTHER;
}

/** The provider credential as sent, for fingerprinting only (never logged). */
export function providerCredential(provider: Provider, headers: IncomingHttpHeaders): string | null {
  for (const name of PROVIDERS[provider].credentialHeaders) {
    const v = headers[name];
    if (typeof v !== 'string' || !v) continue;
    return name === 'authorization' ? v.replace(/^Bearer\s+/i, '') : v;
  }
  return null;
}
