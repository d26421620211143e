/** What the usage layer needs from a request body, parsed once per request. */
import type { Provider } from '../types.js';
import { PROVIDERS } from '../providers/index.js';
import { readMultipartFields } from './multipart.js';
import { isRecord } from './normalize.js';
import type { RequestInfo } from './types.js';

/** Bodies larger than this are not parsed: a prompt is never this big, an upload might be. */
const MAX_JSON_BYTES = 64 * 1024 * 1024;
/** KEYRELAY_BODY_LOG_BYTES' default: a body up to this is logged whole (as configured by default). */
const KEEP_TEXT_MAX_BYTES = 64 * 1024;

/**
 * JSON by content-type, or a body that looks like a JSON object under a type that is not JSON (curl's
 * default form type, none at all): an upstream that parses it anyway must not get past model rules.
 */
function shouldParse(contentType: string | undefined, body: Buffer): boolean {
  if (body.length === 0 || body.length > MAX_JSON_BYTES) return false;
  const mime = ((contentType ?? '').split(';')[0] ?? '').trim().toLowerCase();
  if (mime === 'application/json' || mime.endsWith('+json')) return true;
  if (mime.startsWith('multipart/')) return false;
  let i = 0;
  while (i < body.length && (body[i] === 0x20 || body[i] === 0x09 || body[i] === 0x0a || body[i] === 0x0d))
    i++;
  return body[i] === 0x7b;
}

function str(v: unknown): string | null {
  return typeof v === 'string' && v !== '' ? v : null;
}

export function parseRequestInfo(
  provider: Provider,
  path: string,
  body: Buffer,
  contentType: string | undefined,
): RequestInfo {
  let json: unknown = null;
  let text: string | undefined;
  if (shouldParse(contentType, body)) {
    text = body.toString('utf8');
    try {
      json = JSON.parse(text) as unknown;
    } catch {
      json = null; // a bad body is upstream's to reject; we just learn nothing from it
    }
  }
  const mime = contentType?.trimStart().slice(0, 19).toLowerCase();
  if (mime === 'multipart/form-data' && body.length > 0)
    return multipartInfo(provider, path, body, contentType!);
  const obj = isRecord(json) ? json : null;
  const endUser = obj ? PROVIDERS[provider].endUser(obj) : null;
  return {
    provider,
    path,
    model: obj ? str(obj.model) : null,
    stream: obj ? obj.stream === true : false,
    end_user: endUser,
    json,
    // Held for the request's life only where the log would decode it again (up to the default log limit).
    text: text !== undefined && body.length <= KEEP_TEXT_MAX_BYTES ? text : undefined,
  };
}

/** An upload (audio, image, file): its text fields stand in for a JSON body (`stream` is the text "true"). */
function multipartInfo(provider: Provider, path: string, body: Buffer, contentType: string): RequestInfo {
  const parsed = readMultipartFields(body, contentType);
  if (!parsed.ok)
    return {
      provider,
      path,
      model: null,
      stream: false,
      end_user: null,
      json: null,
      bodyError: parsed.error,
    };
  const f = parsed.fields;
  return {
    provider,
    path,
    model: str(f.model),
    stream: f.stream === 'true',
    end_user: PROVIDERS[provider].endUser(f),
    json: null,
  };
}
