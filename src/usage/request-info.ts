/** What the usage layer needs from a request body, parsed once per request. */
import type { RequestInfo } from './types.js';
import { isRecord } from './normalize.js';

/** Bodies larger than this are not parsed: a prompt is never this big, an upload might be. */
const MAX_JSON_BYTES = 64 * 1024 * 1024;

function isJsonContentType(contentType: string | undefined): boolean {
  if (!contentType) return false;
  const mime = (contentType.split(';')[0] ?? '').trim().toLowerCase();
  return mime === 'application/json' || mime.endsWith('+json');
}

function str(v: unknown): string | null {
  return typeof v === 'string' && v !== '' ? v : null;
}

export function parseRequestInfo(
  provider: 'openai' | 'anthropic',
  path: string,
  body: Buffer,
  contentType: string | undefined,
): RequestInfo {
  let json: unknown = null;
  if (isJsonContentType(contentType) && body.length > 0 && body.length <= MAX_JSON_BYTES) {
    try {
      json = JSON.parse(body.toString('utf8')) as unknown;
    } catch {
      json = null; // a bad body is upstream's to reject; we just learn nothing from it
    }
  }
  const obj = isRecord(json) ? json : null;
  let endUser: string | null = null;
  if (obj) {
    endUser =
      provider === 'openai'
        ? (str(obj.user) ?? str(obj.safety_identifier))
        : isRecord(obj.metadata)
          ? str(obj.metadata.user_id)
          : null;
  }
  return {
    provider,
    path,
    model: obj ? str(obj.model) : null,
    stream: obj ? obj.stream === true : false,
    end_user: endUser,
    json,
  };
}
