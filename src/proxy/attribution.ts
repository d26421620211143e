/**
 * Who a request is for, as its headers say (README, "Attribution"): keyrelay's own `proxy-user`,
 * `proxy-session` and `proxy-property-<name>`, Helicone's `Helicone-User-Id`, `Helicone-Session-Id` and
 * `Helicone-Property-<name>` as their aliases (keyrelay's win when both come), and else the session a coding
 * client names by itself (the provider module's `clientSession`). None of keyrelay's or Helicone's headers is
 * forwarded (headers.ts).
 */
import type { IncomingHttpHeaders } from 'node:http';
import { providerModule, type Provider } from '../providers/index.js';

/** Longest end user, session or property value kept; longer ones are cut. */
const MAX_VALUE_CHARS = 256;
/** Longest property name kept. */
const MAX_PROPERTY_NAME_CHARS = 64;

const PREFIXES = ['proxy-property-', 'helicone-property-'] as const;

/** The one rule for a value kept from a request, header or body: a non-empty string, cut; else null. */
function kept(v: unknown): string | null {
  return typeof v === 'string' && v !== '' ? v.slice(0, MAX_VALUE_CHARS) : null;
}

function headerOf(headers: IncomingHttpHeaders): (name: string) => string | null {
  return (name) => kept(headers[name]);
}

/** The end user the headers name, or null (the body's own field comes next: metering/request-info.ts). */
export function endUserHeader(headers: IncomingHttpHeaders): string | null {
  const header = headerOf(headers);
  return header('proxy-user') ?? header('helicone-user-id');
}

/**
 * The end user a request's row records and the key's caps per end user count: the headers', else the body's
 * own field (metering/request-info.ts), cut by the same rule (the body itself goes upstream as sent).
 */
export function endUserOf(
  headers: IncomingHttpHeaders,
  info: { end_user?: string | null } | null | undefined,
): string | null {
  return endUserHeader(headers) ?? kept(info?.end_user);
}

/** The session: keyrelay's header, Helicone's, then what the client itself sends. */
export function sessionOf(
  headers: IncomingHttpHeaders,
  provider: Provider | null,
  body: unknown,
): string | null {
  const header = headerOf(headers);
  const named = header('proxy-session') ?? header('helicone-session-id');
  if (named !== null || provider === null) return named;
  const json = typeof body === 'object' && body !== null && !Array.isArray(body) ? body : null;
  const own = providerModule(provider).clientSession(header, json as Record<string, unknown> | null);
  return kept(own);
}

/** Custom properties by name (lower case, as Node gives header names); keyrelay's header wins over Helicone's. */
export function propertiesOf(headers: IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  // Helicone's first, so keyrelay's own overwrite them.
  for (const prefix of [...PREFIXES].reverse()) {
    for (const name of Object.keys(headers)) {
      const value = headers[name];
      if (name.startsWith(prefix) && name.length > prefix.length && typeof value === 'string') {
        out[name.slice(prefix.length).slice(0, MAX_PROPERTY_NAME_CHARS)] = value.slice(0, MAX_VALUE_CHARS);
      }
    }
  }
  return out;
}
