/** What the usage layer needs from a request body, parsed once per request. */
import { isRecord } from './normalize.js';
import type { ParsedRequest } from './types.js';

/** The end user a body (or an upload's text fields) names: the provider's own field (ProviderModule.endUser). */
export type EndUserOf = (fields: Record<string, unknown>) => string | null;

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

/** A non-empty string, else null. */
export function str(v: unknown): string | null {
  return typeof v === 'string' && v !== '' ? v : null;
}

/** An upload (multipart): its parts are read as a stream (`readMultipartFields`), not by `parseRequest`. */
export function isUpload(contentType: string | undefined, body: Buffer): boolean {
  return body.length > 0 && contentType?.trimStart().slice(0, 19).toLowerCase() === 'multipart/form-data';
}

/** What a body that is not an upload says. */
export function parseRequest(
  body: Buffer,
  contentType: string | undefined,
  endUser: EndUserOf,
): ParsedRequest {
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
  const obj = isRecord(json) ? json : null;
  return {
    model: obj ? str(obj.model) : null,
    stream: obj ? obj.stream === true : false,
    end_user: obj ? endUser(obj) : null,
    json,
    // Held for the request's life only where the log would decode it again (up to the default log limit).
    text: text !== undefined && body.length <= KEEP_TEXT_MAX_BYTES ? text : undefined,
  };
}
