import { describe, expect, it } from 'vitest';
import { readMultipartFields } from './multipart.js';

const CT = 'multipart/form-data; boundary=----b0und';
const part = (name: string, value: string, file?: string) =>
  `------b0und\r\nContent-Disposition: form-data; name="${name}"${file ? `; filename="${file}"\r\nContent-Type: application/octet-stream` : ''}\r\n\r\n${value}\r\n`;

describe('readMultipartFields', () => {
  it('reads text fields, steps over files (binary with CRLFs and boundary-like bytes inside)', async () => {
    const body = Buffer.from(
      part('file', '\r\n----b0un\r\n--\u0000\u00ff', 'a.mp3') +
        part('model', 'gpt-4o-transcribe') +
        part('stream', 'true') +
        '------b0und--\r\n',
      'latin1',
    );
    expect(await readMultipartFields(body, CT)).toEqual({
      ok: true,
      fields: { model: 'gpt-4o-transcribe', stream: 'true' },
      files: 1,
    });
  });

  it('reads a quoted boundary, an unquoted name, and a preamble as the servers do', async () => {
    const body = Buffer.from(
      // A delimiter not at a line start is preamble, not a part.
      'xx------b0und\r\nContent-Disposition: form-data; name="model"\r\n\r\ngpt-4o-mini\r\n' +
        '------b0und\r\nContent-Disposition: form-data; name=model\r\n\r\no1-pro\r\n------b0und--',
    );
    expect(await readMultipartFields(body, 'multipart/form-data; boundary="----b0und"')).toEqual({
      ok: true,
      fields: { model: 'o1-pro' },
      files: 0,
    });
  });

  it('hands file parts to a reader when asked', async () => {
    const body = Buffer.from(part('file', 'line 1\nline 2', 'batch.jsonl') + '------b0und--');
    const seen: string[] = [];
    const r = await readMultipartFields(body, CT, (name, content) => {
      content.on('data', (piece: Buffer) => seen.push(`${name}:${piece.toString()}`));
    });
    expect(r).toMatchObject({ ok: true, files: 1 });
    expect(seen.join('')).toBe('file:line 1\nline 2');
  });

  it('refuses what servers read two ways: two boundaries, two model fields, two dispositions', async () => {
    const cases: [string, string, RegExp][] = [
      [
        'multipart/form-data; boundary=----b0und; boundary=other',
        part('model', 'a') + '------b0und--',
        /more than one boundary/,
      ],
      [CT, part('model', 'a') + part('model', 'b') + '------b0und--', /more than one `model`/],
      [
        CT,
        '------b0und\r\nContent-Disposition: form-data; name="model"\r\nContent-Disposition: form-data; name="x"\r\n\r\na\r\n------b0und--',
        /more than one Content-Disposition/,
      ],
      [
        CT,
        '------b0und\r\nContent-Disposition: form-data; name="x"; name="model"\r\n\r\na\r\n------b0und--',
        /names its field more than once/,
      ],
      [
        CT,
        '------b0und\r\nContent-Disposition: form-data; name="model"\r\nContent-Transfer-Encoding: base64\r\n\r\nbzEtcHJv\r\n------b0und--',
        /transfer encoding/,
      ],
      [CT, part('model', 'a', 'model.txt') + '------b0und--', /sent as a file/],
    ];
    for (const [type, body, error] of cases) {
      const r = await readMultipartFields(Buffer.from(body), type);
      expect(r, body).toMatchObject({ ok: false, error: expect.stringMatching(error) as unknown });
    }
  });

  it('says what is wrong with a malformed body instead of throwing', async () => {
    const cases: [string, string][] = [
      ['multipart/form-data', part('model', 'a')],
      [CT, 'nothing here'],
      [CT, part('model', 'a')],
      [CT, '------b0und\r\nContent-Disposition: form-data; name="x"'],
    ];
    for (const [type, body] of cases) {
      const r = await readMultipartFields(Buffer.from(body), type);
      expect(r.ok, body).toBe(false);
    }
  });
});
