/**
 * The one place a request target becomes an upstream path, and the one place it is refused. The upstream
 * origin always comes from configuration; this only decides which path (and query) may follow it.
 * Refused: absolute-form targets, a leading `//`, `.`/`..` segments (raw, percent-encoded in any case, or
 * double-encoded), encoded `/` or `\`, backslashes, control characters (raw or encoded), fragments.
 * https://www.rfc-editor.org/rfc/rfc3986#section-5.2.4 describes the dot-segment removal we refuse to
 * leave to whoever parses the URL next.
 */
import type { Provider } from '../types.js';
import { providerByRoute } from '../providers/index.js';

export const PROXY_PREFIX = '/api/proxy/';

export type TargetResult =
  | { ok: true; provider: Provider; path: string; query: string }
  // `provider` is set when the route named one, so the refusal can take that provider's error shape and be
  // logged under it, with `rawPath` (what followed the provider, as received) as the row's path.
  | { ok: false; reason: 'unknown_provider'; detail: string; provider?: undefined }
  | { ok: false; reason: 'bad_path'; detail: string; provider?: undefined }
  | { ok: false; reason: 'bad_path'; detail: string; provider: Provider; rawPath: string };

// Control characters, space, backslash, fragment and characters Node would not give us raw anyway.

const RAW_FORBIDDEN = /[\u0000-\u0020\u007f\\#]/;

/** Percent-decodes repeatedly (double encoding) until stable; null when the encoding is malformed. */
function decodeFully(segment: string): string | null {
  let cur = segment;
  for (let i = 0; i < 4 && cur.includes('%'); i++) {
    let next: string;
    try {
      next = decodeURIComponent(cur);
    } catch {
      return null;
    }
    if (next === cur) break;
    cur = next;
  }
  return cur;
}

function badSegment(segment: string): string | null {
  if (segment === '.' || segment === '..') return 'dot segment';
  if (!segment.includes('%')) return null;
  const decoded = decodeFully(segment);
  if (decoded === null) return 'malformed percent-encoding';

  if (/[/\\\u0000-\u001f\u007f]/.test(decoded)) return 'encoded separator or control character';
  if (/^\.+$/.test(decoded)) {
    return 'encoded dot segment';
  }
  return null;
}

/** Parses the raw request target (`req.url` as received, never normalised). */
export function resolveTarget(rawUrl: string): TargetResult {
  if (!rawUrl.startsWith(PROXY_PREFIX)) {
    return { ok: false, reason: 'bad_path', detail: 'Request target must be a path under /api/proxy/.' };
  }
  const q = rawUrl.indexOf('?');
  const pathPart = q === -1 ? rawUrl : rawUrl.slice(0, q);
  const query = q === -1 ? '' : rawUrl.slice(q);
  const afterPrefix = pathPart.slice(PROXY_PREFIX.length);
  const slash = afterPrefix.indexOf('/');
  const name = slash === -1 ? afterPrefix : afterPrefix.slice(0, slash);
  const provider = providerByRoute(name)?.id;
  if (!provider) return { ok: false, reason: 'unknown_provider', detail: 'Unknown provider.' };
  const rest = slash === -1 ? '' : afterPrefix.slice(slash);
  const rawPath = rawUrl.slice(PROXY_PREFIX.length + name.length);

  if (RAW_FORBIDDEN.test(rawUrl))
    return { ok: false, reason: 'bad_path', provider, rawPath, detail: 'Forbidden character in path.' };
  if (rest.startsWith('//'))
    return { ok: false, reason: 'bad_path', provider, rawPath, detail: 'Path may not start with //.' };
  const segments = rest.split('/');
  for (let i = 1; i < segments.length; i++) {
    const seg = segments[i]!;
    if (seg === '' && i !== segments.length - 1) {
      return { ok: false, reason: 'bad_path', provider, rawPath, detail: 'Empty path segment.' };
    }
    const why = badSegment(seg);
    if (why) return { ok: false, reason: 'bad_path', provider, rawPath, detail: `Refused path: ${why}.` };
  }
  // The query cannot change the origin, but encoded control characters in it are never legitimate.
  if (/%(?:[01][0-9a-f]|7f)/i.test(query)) {
    return {
      ok: false,
      reason: 'bad_path',
      provider,
      rawPath,
      detail: 'Encoded control character in query.',
    };
  }
  return { ok: true, provider, path: rest === '' ? '/' : rest, query };
}
