import { Readable } from 'node:stream';
import zlib from 'node:zlib';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { injectStreamUsage, parseRequestInfo } from '../metering/index.js';
import {
  createIdentityUsageStripper,
  createUsageStripper,
  stripUsageFromEvent,
  stripUsageFromText,
} from './stream-usage.js';
import { openAIChatStream } from '../../test/helpers/test-streams.js';

function info(body: unknown, path = '/v1/chat/completions', provider: 'openai' | 'anthropic' = 'openai') {
  const raw = Buffer.from(JSON.stringify(body));
  return { raw, info: parseRequestInfo(provider, path, raw, 'application/json') };
}

/** Both strippers where both apply (an identity-coded body): each case checks that they agree. */
async function strip(chunks: Buffer[], encoding?: string, maxEventBytes = 2 * 1024 * 1024): Promise<Buffer> {
  const out: Buffer[] = [];
  const stripper = createUsageStripper(encoding, { maxEventBytes });
  stripper.on('data', (b: Buffer) => out.push(b));
  await new Promise<void>((resolve, reject) => {
    stripper.on('end', resolve);
    stripper.on('error', reject);
    Readable.from(chunks).pipe(stripper);
  });
  const piped = Buffer.concat(out);
  if (encoding === undefined) {
    const sent: Buffer[] = [];
    const rewrite = createIdentityUsageStripper({ maxEventBytes }, (piece) => sent.push(piece));
    for (const c of chunks) rewrite.push(c);
    rewrite.end();
    expect(Buffer.concat(sent).toString('latin1')).toBe(piped.toString('latin1'));
  }
  return piped;
}

function* splits(bytes: Buffer): Generator<Buffer[]> {
  for (let k = 0; k <= bytes.length; k++) yield [bytes.subarray(0, k), bytes.subarray(k)];
  yield Array.from(bytes, (_b, i) => bytes.subarray(i, i + 1));
}

describe('injectStreamUsage', () => {
  it('adds include_usage as a new first member, leaving every other byte as sent', () => {
    const raw = Buffer.from('  {"model":"gpt-4o","stream":true,"seed":12345678901234567890,"messages":[]}');
    const { info: req } = {
      info: parseRequestInfo('openai', '/v1/chat/completions', raw, 'application/json'),
    };
    const out = injectStreamUsage(req, raw)!;
    expect(out.toString()).toBe(
      '  {"stream_options":{"include_usage":true},"model":"gpt-4o","stream":true,"seed":12345678901234567890,"messages":[]}',
    );
  });

  it('rewrites stream_options that exist without include_usage, keeping their other options', () => {
    const { raw, info: req } = info({
      model: 'gpt-4o',
      stream: true,
      stream_options: { include_obfuscation: false },
    });
    expect(JSON.parse(injectStreamUsage(req, raw)!.toString())).toEqual({
      model: 'gpt-4o',
      stream: true,
      stream_options: { include_obfuscation: false, include_usage: true },
    });
    const nulled = info({ model: 'gpt-4o', stream: true, stream_options: null });
    expect(JSON.parse(injectStreamUsage(nulled.info, nulled.raw)!.toString()).stream_options).toEqual({
      include_usage: true,
    });
  });

  it('leaves requests alone that already ask for usage, do not stream, or are not chat completions', () => {
    const cases = [
      info({ model: 'gpt-4o', stream: true, stream_options: { include_usage: true } }),
      info({ model: 'gpt-4o', stream: false }),
      info({ model: 'gpt-4o', messages: [] }),
      info({ model: 'gpt-4o', stream: true, input: 'x' }, '/v1/responses'),
      info({ model: 'claude-sonnet-4-0', stream: true }, '/v1/messages', 'anthropic'),
    ];
    for (const c of cases) expect(injectStreamUsage(c.info, c.raw)).toBeNull();
    const notJson = parseRequestInfo(
      'openai',
      '/v1/chat/completions',
      Buffer.from('{"stream":true'),
      'application/json',
    );
    expect(injectStreamUsage(notJson, Buffer.from('{"stream":true'))).toBeNull();
  });
});

describe('createUsageStripper', () => {
  const withUsage = Buffer.from(openAIChatStream({ includeUsage: true }));
  const without = Buffer.from(openAIChatStream({ includeUsage: false }));

  it('gives the caller exactly the stream it would have got without include_usage, however it is split', async () => {
    expect(withUsage.equals(without)).toBe(false);
    for (const chunks of splits(withUsage)) expect((await strip(chunks)).equals(without)).toBe(true);
  });

  it('is exact with CRLF and CR line endings', async () => {
    for (const eol of ['\r\n', '\r']) {
      const w = Buffer.from(openAIChatStream({ includeUsage: true }).replace(/\n/g, eol));
      const wo = Buffer.from(openAIChatStream({ includeUsage: false }).replace(/\n/g, eol));
      for (const chunks of splits(w)) expect((await strip(chunks)).toString()).toBe(wo.toString());
    }
  });

  it('decodes a gzip or br upstream body and sends identity bytes equal to the plain stream', async () => {
    for (const [encoding, packed] of [
      ['gzip', zlib.gzipSync(withUsage)],
      ['br', zlib.brotliCompressSync(withUsage)],
    ] as const) {
      for (const chunks of splits(packed)) expect((await strip(chunks, encoding)).equals(without)).toBe(true);
    }
  });

  it('is exact for arbitrary content, whitespace and member orders', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.string({ unit: 'grapheme' }), { minLength: 0, maxLength: 6 }),
        fc.array(fc.integer({ min: 1, max: 40 }), { minLength: 1, maxLength: 30 }),
        async (deltas, cuts) => {
          const w = Buffer.from(openAIChatStream({ includeUsage: true, deltas }));
          const wo = Buffer.from(openAIChatStream({ includeUsage: false, deltas }));
          const chunks: Buffer[] = [];
          let at = 0;
          for (const n of cuts) {
            chunks.push(w.subarray(at, at + n));
            at += n;
          }
          chunks.push(w.subarray(at));
          expect((await strip(chunks)).equals(wo)).toBe(true);
        },
      ),
      { numRuns: 200 },
    );
    const firstMember =
      'data: {"usage":null, "id":"x","choices":[{"delta":{"content":"\\"usage\\":null"}}]}\n\n';
    expect((await strip([Buffer.from(firstMember)])).toString()).toBe(
      'data: {"id":"x","choices":[{"delta":{"content":"\\"usage\\":null"}}]}\n\n',
    );
    const spaced = 'data: {"id":"x", "choices": [], "usage" : {"prompt_tokens": 1}}\n\ndata: [DONE]\n\n';
    expect((await strip([Buffer.from(spaced)])).toString()).toBe('data: [DONE]\n\n');
  });

  it('cuts the usage:null tail from the bytes exactly as the text path does', () => {
    const payload = fc.constantFrom(
      '{"id":"x","choices":[{"delta":{"content":"hi"}}],"usage":null}',
      '{"id":"x","choices":[{"delta":{"content":"é世🎉 \\"usage\\":null}"}}],"usage":null}',
      '{"id":"x","choices":[],"usage":{"prompt_tokens":1}}',
      '{"id":"x","usage":null,"choices":[]}',
      '{"usage":null}',
      ',"usage":null}',
      '{"id":"x","choices":[]} ,"usage":null}',
      '{"id":"x","usage":null }',
      '[DONE]',
    );
    const head = fc.constantFrom('data: ', 'data:', 'data:  ', 'event: e\ndata: ', ': c\ndata: ', 'dat: ');
    const end = fc.constantFrom('\n\n', '\r\n\r\n', '\r\r', '\n', '', '\ndata: more\n\n', '\nid: 1\n\n');
    fc.assert(
      fc.property(head, payload, end, (h, p, e) => {
        const segment = { raw: Buffer.from(h + p + e), isEvent: true, clipped: false };
        expect(stripUsageFromEvent(segment).equals(stripUsageFromText(segment))).toBe(true);
      }),
      { numRuns: 1000 },
    );
  });

  it('emits each event as soon as its blank line arrives, without a stream too', () => {
    const sent: string[] = [];
    const rewrite = createIdentityUsageStripper({ maxEventBytes: 1024 }, (b) => sent.push(b.toString()));
    const firstEnd = withUsage.indexOf('\n\n') + 2;
    rewrite.push(withUsage.subarray(0, firstEnd));
    rewrite.push(withUsage.subarray(firstEnd, firstEnd + 7));
    expect(sent.join('')).toBe(without.subarray(0, without.indexOf('\n\n') + 2).toString());
  });

  it('emits each event as soon as its blank line arrives', async () => {
    const stripper = createUsageStripper(undefined, { maxEventBytes: 2 * 1024 * 1024 });
    const seen: string[] = [];
    stripper.on('data', (b: Buffer) => seen.push(b.toString()));
    const first = without.subarray(0, without.indexOf('\n\n') + 2);
    stripper.write(withUsage.subarray(0, withUsage.indexOf('\n\n') + 2));
    stripper.write(withUsage.subarray(withUsage.indexOf('\n\n') + 2, withUsage.indexOf('\n\n') + 9));
    await new Promise((r) => setImmediate(r));
    expect(seen.join('')).toBe(first.toString());
    stripper.destroy();
  });

  it('fails the stream on a corrupt compressed body instead of passing garbage', async () => {
    await expect(strip([Buffer.from('not gzip at all')], 'gzip')).rejects.toThrow();
  });
});

describe('createUsageStripper limits', () => {
  const chunk = (content: string) =>
    `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"${content}"}}],"usage":null}\n\n`;
  const usage =
    'data: {"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}\n\n';

  it('passes an event over maxEventBytes on unchanged, piece by piece, and strips the others', async () => {
    const big = chunk('z'.repeat(50_000));
    const upstream = Buffer.from(chunk('a') + big + chunk('b') + usage + 'data: [DONE]\n\n');
    const expected =
      chunk('a').replace(',"usage":null', '') +
      big +
      chunk('b').replace(',"usage":null', '') +
      'data: [DONE]\n\n';
    for (const size of [1, 777, 4096, upstream.length]) {
      const pieces = Array.from({ length: Math.ceil(upstream.length / size) }, (_v, i) =>
        upstream.subarray(i * size, (i + 1) * size),
      );
      expect((await strip(pieces, undefined, 4096)).toString(), `pieces of ${size}`).toBe(expected);
    }
    const gz = zlib.gzipSync(upstream);
    expect((await strip([gz], 'gzip', 4096)).toString()).toBe(expected);
  });

  it('decodes only as fast as the caller reads', async () => {
    // 64 MiB of one event from 64 KB of gzip; the caller reads nothing for a while.
    const event = Buffer.concat([
      Buffer.from('data: "'),
      Buffer.alloc(64 * 1024 * 1024, 'q'),
      Buffer.from('"\n\n'),
    ]);
    const stripper = createUsageStripper('gzip', { maxEventBytes: 1024 * 1024 });
    stripper.write(zlib.gzipSync(event));
    await new Promise((r) => setTimeout(r, 200));
    expect(stripper.readableLength).toBeLessThan(2 * 1024 * 1024);
    let total = 0;
    stripper.on('data', (b: Buffer) => (total += b.length));
    await new Promise<void>((resolve) => {
      stripper.on('end', resolve);
      stripper.end();
    });
    expect(total).toBe(event.length);
  });
});
