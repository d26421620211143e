/**
 * Reads the small text fields of a multipart/form-data body (audio, image and file uploads) — `model`,
 * `stream`, `user`… — from the body already in memory, without copying it: the file parts are only
 * stepped over. What keyrelay needs is the model (so model limits apply to uploads) and whether a stream
 * was asked for.
 */

/** Text fields longer than this are not kept (a prompt may be long; a model name never is). */
const MAX_FIELD_BYTES = 64 * 1024;
const MAX_PARTS = 1000;

export type MultipartFields =
  { ok: true; fields: Record<string, string>; files: number } | { ok: false; error: string };

/** The boundary a content-type names, or null. RFC 2046: 1–70 characters, possibly quoted. */
export function multipartBoundary(contentType: string): string | null {
  const m = /;\s*boundary=(?:"([^"]{1,70})"|([^\s;]{1,70}))/i.exec(contentType);
  return m ? (m[1] ?? m[2] ?? null) : null;
}

export function readMultipartFields(body: Buffer, contentType: string): MultipartFields {
  const boundary = multipartBoundary(contentType);
  if (!boundary) return { ok: false, error: 'The multipart body names no boundary.' };
  const delimiter = Buffer.from(`--${boundary}`, 'latin1');
  const fields: Record<string, string> = {};
  let files = 0;
  let at = body.indexOf(delimiter);
  if (at < 0) return { ok: false, error: 'The multipart body does not contain its boundary.' };
  for (let parts = 0; parts < MAX_PARTS; parts++) {
    let pos = at + delimiter.length;
    // `--` after a delimiter closes the body.
    if (body[pos] === 0x2d && body[pos + 1] === 0x2d) return { ok: true, fields, files };
    while (body[pos] === 0x20 || body[pos] === 0x09) pos++; // transport padding
    if (body[pos] === 0x0d && body[pos + 1] === 0x0a) pos += 2;
    else return { ok: false, error: 'Malformed multipart body: a boundary is not followed by a line end.' };
    const headEnd = body.indexOf('\r\n\r\n', pos, 'latin1');
    if (headEnd < 0) return { ok: false, error: 'Malformed multipart body: a part has no end of headers.' };
    const head = body.toString('latin1', pos, headEnd);
    const next = body.indexOf(Buffer.concat([Buffer.from('\r\n', 'latin1'), delimiter]), headEnd + 4);
    if (next < 0)
      return { ok: false, error: 'Malformed multipart body: it ends before its closing boundary.' };
    const disposition = /^content-disposition:\s*form-data\s*;(.*)$/im.exec(head)?.[1] ?? '';
    const name = /(?:^|;)\s*name="([^"]*)"/i.exec(disposition)?.[1];
    if (/(?:^|;)\s*filename\*?=/i.test(disposition)) files++;
    else if (name !== undefined && next - (headEnd + 4) <= MAX_FIELD_BYTES && !(name in fields)) {
      fields[name] = body.toString('utf8', headEnd + 4, next);
    }
    at = next + 2;
  }
  return { ok: false, error: `Malformed multipart body: more than ${MAX_PARTS} parts.` };
}
