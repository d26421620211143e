/**
 * What the request log may keep of headers and query strings: anything that names or looks like a
 * credential is replaced by `[redacted]` before the row exists. By name (any spelling: `api_key`,
 * `X-ApiKey`, `x-private_key`, `auth`, `password`…) and by value (provider key formats, keyrelay keys,
 * bearer/basic credentials, JWTs, long high-entropy strings), because callers put keys in headers keyrelay
 * has never heard of.
 */

export const REDACTED = '[redacted]';

/** Name words that mark a credential, with `-`, `_` or `.` (or nothing) on either side. */
const SECRET_NAME =
  /(?:^|[-_.])(?:auth|authorization|authentication|apikey|key|token|secret|password|passwd|pwd|credentials?|bearer|cookie|signature|sig|private|accesskey|privatekey|secretkey|authtoken)(?:$|[-_.])/i;

/**
 * Header names repeat from request to request: the answer is kept per name. Bounded (names are the
 * caller's to choose): cleared when full.
 */
const secretNames = new Map<string, boolean>();
const SECRET_NAMES_MAX = 1024;

export function isSecretName(name: string): boolean {
  let secret = secretNames.get(name);
  if (secret === undefined) {
    secret = SECRET_NAME.test(name);
    if (secretNames.size >= SECRET_NAMES_MAX) secretNames.clear();
    secretNames.set(name, secret);
  }
  return secret;
}

/** Credential shapes, found anywhere inside a value: one pass (this runs for every header of every row). */
const SECRET_VALUE = new RegExp(
  [
    /\bsk-(?:ant-|proj-|svcacct-|admin-)?[A-Za-z0-9_-]{16,}/, // OpenAI, Anthropic
    /\bkr_[0-9A-Za-z]{49}\b/, // keyrelay keys: kr_ + 49 base62 (keys/format.ts)
    /\b(?:Bearer|Basic|Token)\s+[^\s,;]+/,
    /\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*/, // JWT
    /\bAIza[0-9A-Za-z_-]{30,}/, // Google API keys (`?key=`)
  ]
    .map((re) => re.source)
    .join('|'),
  'gi',
);

/** Shorter than any credential shape above: most header values, passed over at once. */
const SHORTEST_SECRET = 12;

/** A run long enough to be a secret; judged by its entropy. */
const LONG_RUN = /[A-Za-z0-9+/=_-]{32,}/g;

/**
 * Bits per character, from the run's own symbol counts. Hex (ids, trace ids, digests) stays at or below 4;
 * hex with dashes (UUIDs) just above; random base62/base64 of 32+ characters is ~4.5–5.5.
 */
export function entropy(s: string): number {
  // LONG_RUN's runs are ASCII: counted in a reused table, summed in order of first appearance (the order
  // a Map would keep, so the same sum to the last bit).
  let distinct = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const seen = counts[c]!;
    if (seen === 0) order[distinct++] = c;
    counts[c] = seen + 1;
  }
  let bits = 0;
  for (let k = 0; k < distinct; k++) {
    const c = order[k]!;
    const p = counts[c]! / s.length;
    counts[c] = 0;
    bits -= p * Math.log2(p);
  }
  return bits;
}

const counts = new Uint32Array(128);
const order = new Uint8Array(128);

const HIGH_ENTROPY = 4.3;

/** The value with every credential-looking part replaced. */
export function redactValue(value: string): string {
  if (value.length < SHORTEST_SECRET) return value;
  const out = value.replace(SECRET_VALUE, REDACTED);
  return out.length < 32
    ? out
    : out.replace(LONG_RUN, (run) => (entropy(run) > HIGH_ENTROPY ? REDACTED : run));
}

/** A query string part, percent-decoded as a server would read it (the raw text when it is not valid). */
function decodeQueryPart(part: string): string {
  try {
    return decodeURIComponent(part.replace(/\+/g, ' '));
  } catch {
    return part;
  }
}

/**
 * A path with its query string redacted by parameter name and by value; the path itself is kept. Every
 * item is judged by its look, a bare one (`?sk-…`, no `=`) and a name as much as a value: callers put keys
 * wherever their client lets them.
 */
export function redactPathQuery(pathAndQuery: string): string {
  const q = pathAndQuery.indexOf('?');
  if (q === -1) return pathAndQuery;
  const params = pathAndQuery
    .slice(q + 1)
    .split('&')
    .map((pair) => {
      const eq = pair.indexOf('=');
      const name = eq === -1 ? pair : pair.slice(0, eq);
      const decoded = decodeQueryPart(name);
      if (redactValue(decoded) !== decoded) return REDACTED;
      if (eq === -1) return pair;
      if (isSecretName(decoded)) return `${name}=${REDACTED}`;
      const value = decodeQueryPart(pair.slice(eq + 1));
      return redactValue(value) === value ? pair : `${name}=${REDACTED}`;
    });
  return `${pathAndQuery.slice(0, q)}?${params.join('&')}`;
}
