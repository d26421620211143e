import { describe, expect, it } from 'vitest';
import { multipartBoundary, readMultipartFields } from './multipart.js';

const CT = 'multipart/form-data; boundary=----b0und';
const part = (name: string, value: string, file?: string) =>
  `------b0und\r\nContent-Disposition: form-data; name="${name}"${file ? `; filename="${file}"\r\nContent-Type: application/octet-stream` : ''}\r\n\r\n${value}\r\n`;

describe('readMultipartFields', () => {
  it('reads text fields, steps over files (binary with CRLFs and boundary-like bytes inside)', () => {
    const body = Buffer.from(
      part('file', '\r\n----b0un\r\n--\u0000\u00ff', 'a.mp3') +
        part('model', 'gpt-4o-transcribe') +
        part('stream', 'true') +
        '------b0und--\r\n',
      'latin1',
    );
    expect(readMultipartFields(body, CT)).toEqual({
      ok: true,
      fields: { model: 'gpt-4o-transcribe', stream: 'true' },
      files: 1,
    });
  });

  it('takes a quoted boundary and keeps the first of repeated fields', () => {
    expect(multipartBoundary('multipart/form-data; boundary="a b"')).toBe('a b');
    const body = Buffer.from(part('model', 'a') + part('model', 'b') + '------b0und--');
    expect(readMultipartFields(body, 'multipart/form-data; boundary="----b0und"')).toMatchObject({
      fields: { model: 'a' },
    });
  });

  it('says what is wrong with a malformed body instead of throwing', () => {
    const cases: [string, string, RegExp][] = [
      ['multipart/form-data', part('model', 'a'), /no boundary/],
      [CT, 'nothing here', /does not contain/],
      [CT, part('model', 'a'), /closing boundary/],
      [CT, '------b0undXX', /line end/],
      [CT, '------b0und\r\nContent-Disposition: form-data; name="x"', /end of headers/],
    ];
    for (const [type, body, error] of cases) {
      const r = readMultipartFields(Buffer.from(body), type);
      expect(r.ok, body).toBe(false);
      if (!r.ok) expect(r.error).toMatch(error);
    }
  });
});
