/**
 * Reads the small text fields of a multipart/form-data body (audio, image and file uploads) — `model`,
 * `stream`, `user`, `purpose` — from the body already in memory, with busboy: the reading of RFC 7578 that
 * common servers share (the delimiter only at a line start, unquoted names, the last `boundary` of a
 * content-type…). Where servers differ, keyrelay does not guess which reading upstream takes: a body that
 * can be read two ways (two boundaries, a field keyrelay reads sent twice, a part with two dispositions or
 * two names, an encoded field) is refused. File parts are only stepped over, or handed to `onFile`.
 */
import type { Readable } from 'node:stream';
import busboy from 'busboy';

/** Text fields longer than this are not kept (a prompt may be long; a model name never is). */
const MAX_FIELD_BYTES = 64 * 1024;
const MAX_PARTS = 1000;
/** The fields keyrelay acts on: each may appear once (others, such as `include[]`, repeat by design). */
const READ_FIELDS = new Set(['model', 'stream', 'user', 'purpose']);
/** The only transfer encodings a field may declare (RFC 7578 §4.7): anything else would be decoded by some. */
const PLAIN_ENCODINGS = new Set(['7bit', '8bit', 'binary']);

export type MultipartFields =
  { ok: true; fields: Record<string, string>; files: number } | { ok: false; error: string };

/** Each file part's name and content, streamed; the parse waits until the content has been read. */
export type FileReader = (name: string, content: Readable) => void;

/** Why this content-type or body is ambiguous before any part is read, or null. */
function ambiguity(body: Buffer, contentType: string, boundary: string): string | null {
  if ((contentType.match(/;\s*boundary\s*=/gi) ?? []).length > 1)
    return 'The multipart content-type names more than one boundary.';
  // Each part's head, as busboy finds it: after a CRLF (or the body's start), the delimiter, then a CRLF.
  const delimiter = Buffer.from(`\r\n--${boundary}\r\n`, 'latin1');
  const first = Buffer.from(`--${boundary}\r\n`, 'latin1');
  let at = body.subarray(0, first.length).equals(first) ? 0 : body.indexOf(delimiter);
  let skip = at === 0 ? first.length : delimiter.length;
  for (let parts = 0; at >= 0 && parts <= MAX_PARTS; parts++) {
    const start = at + skip;
    const end = body.indexOf('\r\n\r\n', start, 'latin1');
    if (end < 0) return null; // busboy says what is wrong with it
    const head = body.toString('latin1', start, end);
    const dispositions = head.match(/^content-disposition:.*$/gim) ?? [];
    if (dispositions.length > 1) return 'A multipart part has more than one Content-Disposition header.';
    if ((dispositions[0]?.match(/;\s*name\s*=/gi) ?? []).length > 1)
      return 'A multipart part names its field more than once.';
    at = body.indexOf(delimiter, end);
    skip = delimiter.length;
  }
  return null;
}

export function readMultipartFields(
  body: Buffer,
  contentType: string,
  onFile?: FileReader,
): Promise<MultipartFields> {
  let parser: busboy.Busboy;
  try {
    parser = busboy({
      headers: { 'content-type': contentType },
      limits: { fieldSize: MAX_FIELD_BYTES, parts: MAX_PARTS },
    });
  } catch {
    return Promise.resolve({ ok: false, error: 'The multipart body names no boundary.' });
  }
  const boundary = /;\s*boundary\s*=\s*(?:"([^"]*)"|([^\s;]+))/i.exec(contentType);
  const unclear = ambiguity(body, contentType, boundary?.[1] ?? boundary?.[2] ?? '');
  if (unclear) return Promise.resolve({ ok: false, error: unclear });
  return new Promise((resolve) => {
    const fields: Record<string, string> = {};
    let files = 0;
    let error: string | null = null;
    const fail = (message: string) => {
      error ??= message;
    };
    parser.on('field', (name, value, info) => {
      if (!READ_FIELDS.has(name)) return;
      if (name in fields) return fail(`The multipart body has more than one \`${name}\` field.`);
      if (info.valueTruncated) return fail(`The multipart field \`${name}\` is too long.`);
      if (!PLAIN_ENCODINGS.has(info.encoding))
        return fail(`The multipart field \`${name}\` has a transfer encoding; send it as plain text.`);
      fields[name] = value;
    });
    parser.on('file', (name, content) => {
      files++;
      if (READ_FIELDS.has(name))
        fail(`The multipart field \`${name}\` is sent as a file; send it as plain text.`);
      if (onFile && error === null) onFile(name, content);
      else content.resume();
    });
    parser.on('partsLimit', () => fail(`Malformed multipart body: more than ${MAX_PARTS} parts.`));
    parser.on('error', (err: Error) =>
      resolve({ ok: false, error: error ?? `Malformed multipart body: ${err.message}.` }),
    );
    parser.on('close', () => resolve(error === null ? { ok: true, fields, files } : { ok: false, error }));
    parser.end(body);
  });
}
