/**
 * What the request log may keep of headers and query strings: anything that names or looks like a
 * credential is replaced by `[redacted]` before the row exists. By name (any spelling: `api_key`,
 * `X-ApiKey`, `x-private_key`, `auth`, `password`…) and by value (provider key formats, keyrelay keys,
 * bearer/basic credentials, JWTs, long high-entropy strings), because callers put keys in headers keyrelay
 * has never heard of.
 */

export const REDACTED = '[redacted]';

/** Name words that mark a credential, once the name is split at `-`, `_` and `.`. */
const SECRET_WORDS = new Set([
  'auth',
  'authorization',
  'authentication',
  'apikey',
  'key',
  'token',
  'secret',
  'password',
  'passwd',
  'pwd',
  'credential',
  'credentials',
  'bearer',
  'cookie',
  'signature',
  'sig',
  'private',
]);

/** Compound names whose words alone are harmless (`x-amz-security-token` is caught by `token`). */
const SECRET_NAMES = new Set(['set-cookie', 'apikey', 'accesskey', 'privatekey', 'secretkey', 'authtoken']);

export function isSecretName(name: string): boolean {
  const lower = name.toLowerCase();
  if (SECRET_NAMES.has(lower)) return true;
  return lower.split(/[-_.]+/).some((w) => SECRET_WORDS.has(w));
}

/** Credential shapes, found anywhere inside a value. */
const SECRET_VALUES = [
  /\bsk-(?:ant-|proj-|svcacct-|admin-)?[A-Za-z0-9_-]{16,}/g, // OpenAI, Anthropic
  /\bkr_[0-9A-Za-z]{49}\b/g, // keyrelay (SPEC §3)
  /\b(?:Bearer|Basic|Token)\s+[^\s,;]+/gi,
  /\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*/g, // JWT
  /\bAIza[0-9A-Za-z_-]{30,}/g, // Google API keys (`?key=`)
];

/** A run long enough to be a secret; judged by its entropy. */
const LONG_RUN = /[A-Za-z0-9+/=_-]{32,}/g;

/**
 * Bits per character, from the run's own symbol counts. Hex (ids, trace ids, digests) stays at or below 4;
 * hex with dashes (UUIDs) just above; random base62/base64 of 32+ characters is ~4.5–5.5.
 */
function entropy(s: string): number {
  const counts = new Map<string, number>();
  for (const ch of s) counts.set(ch, (counts.get(ch) ?? 0) + 1);
  let bits = 0;
  for (const n of counts.values()) {
    const p = n / s.length;
    bits -= p * Math.log2(p);
  }
  return bits;
}

const HIGH_ENTROPY = 4.3;

/** The value with every credential-looking part replaced. */
export function redactValue(value: string): string {
  let out = value;
  for (const re of SECRET_VALUES) out = out.replace(re, REDACTED);
  return out.replace(LONG_RUN, (run) => (entropy(run) > HIGH_ENTROPY ? REDACTED : run));
}

/** A path with its query string redacted by parameter name and by value; the path itself is kept. */
export function redactPathQuery(pathAndQuery: string): string {
  const q = pathAndQuery.indexOf('?');
  if (q === -1) return pathAndQuery;
  const params = pathAndQuery
    .slice(q + 1)
    .split('&')
    .map((pair) => {
      const eq = pair.indexOf('=');
      if (eq === -1) return pair;
      const name = pair.slice(0, eq);
      let decoded = name;
      try {
        decoded = decodeURIComponent(name.replace(/\+/g, ' '));
      } catch {
        // keep the raw name
      }
      if (isSecretName(decoded)) return `${name}=${REDACTED}`;
      let value = pair.slice(eq + 1);
      try {
        value = decodeURIComponent(value.replace(/\+/g, ' '));
      } catch {
        // judge the raw value
      }
      const redacted = redactValue(value);
      return redacted === value ? pair : `${name}=${REDACTED}`;
    });
  return `${pathAndQuery.slice(0, q)}?${params.join('&')}`;
}
