/**
 * What crosses keyrelay, in each direction (docs/ARCHITECTURE.md, "Forward"). Request headers are copied from `rawHeaders` so names,
 * values and order reach upstream byte-for-byte; only what must not cross is dropped.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { isSecretName, REDACTED, redactValue } from './redact.js';

// RFC 9110 §7.6.1 hop-by-hop fields, plus the legacy ones proxies still see.
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'proxy-authenticate',
  'proxy-authorization',
]);

/**
 * Request headers never forwarded (besides hop-by-hop, `proxy-*`/`proxy_*`, `helicone-*` and those named in
 * Connection).
 */
const REQUEST_DROP = new Set([
  'host',
  'cookie',
  'forwarded',
  // The body is re-sent from our buffer: undici sets the length; `expect` was already honoured by Node.
  'content-length',
  'expect',
]);

const RESPONSE_DROP = new Set(['set-cookie', 'alt-svc']);

/** Headers that may appear at most once; a second copy is ambiguous about who is calling and is refused. */
const SINGLETONS = ['proxy-api-key', 'authorization', 'x-api-key', 'api-key', 'host'] as const;

const NO_TOKENS: readonly string[] = [];

/** The header names a Connection header lists (usually none or one: `keep-alive`, `close`). */
function connectionTokens(value: string | string[] | undefined): readonly string[] {
  if (value === undefined || value === '') return NO_TOKENS;
  const out: string[] = [];
  for (const v of Array.isArray(value) ? value : [value]) {
    for (const t of v.split(',')) {
      const n = t.trim().toLowerCase();
      if (n && !out.includes(n)) out.push(n);
    }
  }
  return out;
}

/** Name of the first credential/host header sent twice, or null. */
export function findDuplicateSingleton(rawHeaders: readonly string[]): string | null {
  const seen = new Set<string>();
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!.toLowerCase();
    if (!(SINGLETONS as readonly string[]).includes(name)) continue;
    if (seen.has(name)) return name;
    seen.add(name);
  }
  return null;
}

/** Flat [name, value, …] list for undici, in the caller's order and spelling. */
export function forwardRequestHeaders(
  rawHeaders: readonly string[],
  connection: string | string[] | undefined,
): string[] {
  const named = connectionTokens(connection);
  const out: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    const lower = name.toLowerCase();
    if (
      HOP_BY_HOP.has(lower) ||
      REQUEST_DROP.has(lower) ||
      lower.startsWith('proxy-') ||
      // Same meaning to anyone who maps `_` to `-` (CGI, some proxies): never forwarded either.
      lower.startsWith('proxy_') ||
      // Helicone's attribution and gateway headers: meant for a Helicone gateway, never for the provider.
      lower.startsWith('helicone-') ||
      lower.startsWith('x-forwarded-') ||
      named.includes(lower)
    ) {
      continue;
    }
    out.push(name, rawHeaders[i + 1]!);
  }
  return out;
}

/** Response headers for the caller: upstream's, minus hop-by-hop, those named in Connection, set-cookie, alt-svc. */
export function filterResponseHeaders(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const named = connectionTokens(headers.connection);
  const out: Record<string, string | string[]> = {};
  for (const name of Object.keys(headers)) {
    const value = headers[name];
    if (value === undefined || HOP_BY_HOP.has(name) || RESPONSE_DROP.has(name) || named.includes(name))
      continue;
    out[name] = value;
  }
  return out;
}

/** Header map for the log row: every credential, by name or by the look of its value, replaced. */
export function redactHeaders(
  headers: IncomingHttpHeaders | Record<string, string | string[]>,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of Object.keys(headers)) {
    const value = headers[name];
    if (value === undefined) continue;
    out[name] = isSecretName(name) ? REDACTED : redactValue(Array.isArray(value) ? value.join(', ') : value);
  }
  return out;
}

/**
 * `proxy_api_key`, any case: refused, not taken as the key. A proxy in front may drop or rename
 * underscore names (nginx drops them by default), so the same request could authenticate as different
 * keys depending on the path it took; an explicit refusal names the fix instead.
 */
export function hasUnderscoreKeyHeader(rawHeaders: readonly string[]): boolean {
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (name.length === 13 && name.toLowerCase() === 'proxy_api_key') return true;
  }
  return false;
}
