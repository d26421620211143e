import zlib from 'node:zlib';
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import { describe, expect, it } from 'vitest';
import { createResponseTap, parseRequestInfo, type RequestInfo } from './index.js';
import {
  anthropicStream,
  DELTAS,
  openAIChatStream,
  openAIResponsesStream,
} from '../../test/helpers/test-streams.js';
import type { Usage } from '../usage/index.js';

/** `zstd -3` of anthropicStream() written to a file (so the frame records its size) (Node 20's zlib cannot compress zstd). */
const ANTHROPIC_ZSTD =
  'KLUv/WRmBJULAJaQNiyARUkHq8ooUoDAo7nBTIiAlO36WwpBRCTaTrQid0uLYYqGzm2ezPk0bXHvsCgAKQAqANlWsdlhRrfQ09OZxeDm/KGefvV8EvqPRGFjQxrC5pUMZE6DRLUmQgbv0ffk3FN1XcaE1rPNTwMC6q3ZuuzpCmaxLJqlURRKp+qyku2hY1d3AY7sRd2RTZ2nN9g6goUgURQx/fZpWZiGCS1dpzEhtrKAIXtaNOqs2dheHQgSvVFEyTTfQXK6Qq9X0/xTtykwPARIFhoAOERMJGmdg5AIwHbZ1hnqPL8KOiAwQmKkQnZfDkCkAPQHLsZTgSRGgeDIPEx+ntUoQ8AP6LQffpAAUTdgwaA4AHETQEwrgE3ibqrh/NICkVLomuAyAZ05ZbiheYBJDfgWNh5gSEAFUlgHDO4dWwESiODLRh5gtyP2hOEsGA6wvXDjJKioCuMZkJCVqRz/Og0LAKJ8AAJDqzCfFwcsKG84xsKBaARHJwPlH7Xf';

const json = (v: unknown) => Buffer.from(JSON.stringify(v));

/** keyrelay's event cap (SSE_EVENT_BYTES, proxy/stream-back.ts) and a decode cap above its own. */
const CAPS = { maxDecodedBytes: 64 * 1024 * 1024, maxEventBytes: 2 * 1024 * 1024 };

function request(provider: 'openai' | 'anthropic', path: string, body: unknown): RequestInfo {
  return parseRequestInfo(provider, path, json(body), 'application/json');
}

const chatRequest = request('openai', '/v1/chat/completions', {
  model: 'gpt-4o-mini',
  stream: true,
  messages: [
    { role: 'system', content: 'You are terse.' },
    { role: 'user', content: 'Say hello to the world in two languages, please.' },
  ],
});
const messagesRequest = request('anthropic', '/v1/messages', {
  model: 'claude-sonnet-4-20250514',
  stream: true,
  max_tokens: 100,
  system: 'You are terse.',
  messages: [{ role: 'user', content: [{ type: 'text', text: 'Say hello to the world.' }] }],
});
const responsesRequest = request('openai', '/v1/responses', {
  model: 'gpt-4o',
  stream: true,
  input: 'Hello',
});

const SSE = { 'content-type': 'text/event-stream; charset=utf-8' };
const JSON_TYPE = { 'content-type': 'application/json' };

interface Run {
  info: RequestInfo;
  headers?: Record<string, string>;
  status?: number;
  chunks: Buffer[];
  complete?: boolean;
  bodyLogBytes?: number;
}

function runTap({ info, headers = SSE, status = 200, chunks, complete = true, bodyLogBytes = 65536 }: Run) {
  const tap = createResponseTap(info, { status, headers }, { ...CAPS, bodyLogBytes });
  for (const c of chunks) tap.write(c);
  return { usage: tap.finish(complete), body: tap.body() };
}

/** runTap for a compressed body: decoding runs off the event loop, so finish() waits until it is done. */
async function runTapDecoded({
  info,
  headers = SSE,
  status = 200,
  chunks,
  complete = true,
  bodyLogBytes = 65536,
}: Run) {
  const tap = createResponseTap(info, { status, headers }, { ...CAPS, bodyLogBytes });
  for (const c of chunks) tap.write(c);
  await tap.drained();
  return { usage: tap.finish(complete), body: tap.body() };
}

/** Every way to cut `bytes` in two, plus one byte at a time. */
function* splits(bytes: Buffer): Generator<Buffer[]> {
  for (let k = 0; k <= bytes.length; k++) yield [bytes.subarray(0, k), bytes.subarray(k)];
  yield Array.from(bytes, (_b, i) => bytes.subarray(i, i + 1));
}

const OPENAI_EXPECTED: Partial<Usage> = {
  input_tokens: 120,
  cache_read_tokens: 64,
  cache_write_tokens: 0,
  output_tokens: 30,
  reasoning_tokens: 12,
  source: 'provider',
  model: 'gpt-4o-mini-2024-07-18',
};
const ANTHROPIC_EXPECTED: Partial<Usage> = {
  input_tokens: 130, // 25 uncached + 5 cache writes + 100 cache reads
  cache_read_tokens: 100,
  cache_write_tokens: 5,
  output_tokens: 42,
  reasoning_tokens: null,
  source: 'provider',
  model: 'claude-sonnet-4-20250514',
};

describe('createResponseTap on SSE streams', () => {
  it('reads the OpenAI usage chunk however the stream is split', () => {
    const bytes = Buffer.from(openAIChatStream({ includeUsage: true }));
    for (const chunks of splits(bytes)) {
      expect(runTap({ info: chatRequest, chunks }).usage).toMatchObject(OPENAI_EXPECTED);
    }
  });

  it('reads Anthropic message_start plus the cumulative message_delta however the stream is split', () => {
    const bytes = Buffer.from(anthropicStream());
    for (const chunks of splits(bytes)) {
      expect(runTap({ info: messagesRequest, chunks }).usage).toMatchObject(ANTHROPIC_EXPECTED);
    }
  });

  it('reads CRLF line endings and multi-line data fields', () => {
    const crlf = Buffer.from(anthropicStream().replace(/\n/g, '\r\n'));
    for (const chunks of splits(crlf)) {
      expect(runTap({ info: messagesRequest, chunks }).usage).toMatchObject(ANTHROPIC_EXPECTED);
    }
    const cr = Buffer.from(openAIChatStream({ includeUsage: true }).replace(/\n/g, '\r'));
    expect(runTap({ info: chatRequest, chunks: [...splits(cr)].at(-1)! }).usage).toMatchObject(
      OPENAI_EXPECTED,
    );
    const usageChunk = JSON.stringify(
      { id: 'x', model: 'gpt-4o', choices: [], usage: { prompt_tokens: 9, completion_tokens: 4 } },
      null,
      1,
    );
    const multi = Buffer.from(`data: ${usageChunk.split('\n').join('\ndata: ')}\n\ndata: [DONE]\n\n`);
    for (const chunks of splits(multi)) {
      expect(runTap({ info: chatRequest, chunks }).usage).toMatchObject({
        input_tokens: 9,
        output_tokens: 4,
        source: 'provider',
      });
    }
  });

  it('reads the Responses API usage from response.completed', () => {
    const bytes = Buffer.from(openAIResponsesStream());
    for (const chunks of splits(bytes)) {
      expect(runTap({ info: responsesRequest, chunks }).usage).toMatchObject({
        input_tokens: 300,
        cache_read_tokens: 256,
        output_tokens: 50,
        reasoning_tokens: 20,
        source: 'provider',
        model: 'gpt-4o-2024-08-06',
      });
    }
  });

  it('decodes gzip, deflate and br streams split at every compressed byte', async () => {
    const openai = Buffer.from(openAIChatStream({ includeUsage: true }));
    const anthropic = Buffer.from(anthropicStream());
    const codecs: Array<[string, (b: Buffer) => Buffer]> = [
      ['gzip', (b) => zlib.gzipSync(b)],
      ['deflate', (b) => zlib.deflateSync(b)],
      ['br', (b) => zlib.brotliCompressSync(b)],
    ];
    for (const [encoding, compress] of codecs) {
      const headers = { ...SSE, 'content-encoding': encoding };
      for (const chunks of splits(compress(openai))) {
        expect((await runTapDecoded({ info: chatRequest, headers, chunks })).usage).toMatchObject(
          OPENAI_EXPECTED,
        );
      }
      for (const chunks of splits(compress(anthropic))) {
        const { usage, body } = await runTapDecoded({ info: messagesRequest, headers, chunks });
        expect(usage).toMatchObject(ANTHROPIC_EXPECTED);
        expect(body.text).toBe(anthropic.toString());
      }
    }
  });

  it('decodes a zstd stream split at every compressed byte', async () => {
    const packed = Buffer.from(ANTHROPIC_ZSTD, 'base64');
    const headers = { ...SSE, 'content-encoding': 'zstd' };
    for (const chunks of splits(packed)) {
      const { usage, body } = await runTapDecoded({ info: messagesRequest, headers, chunks });
      expect(usage).toMatchObject(ANTHROPIC_EXPECTED);
      expect(body.text).toBe(anthropicStream());
    }
  });

  it('marks an Anthropic stream cut after message_start as partial, counting the text streamed so far', () => {
    const full = anthropicStream();
    const cut = Buffer.from(full.slice(0, full.indexOf('event: content_block_stop')));
    const { usage } = runTap({ info: messagesRequest, chunks: [cut], complete: false });
    expect(usage).toMatchObject({
      input_tokens: 130,
      cache_read_tokens: 100,
      cache_write_tokens: 5,
      source: 'partial',
    });
    expect(usage.output_tokens).toBeGreaterThan(1);
  });

  it('reads what arrived of a compressed stream that was cut short', async () => {
    const text = anthropicStream();
    const cut = zlib.gzipSync(Buffer.from(text.slice(0, text.indexOf('event: message_delta'))), {
      flush: zlib.constants.Z_SYNC_FLUSH,
    });
    // A gzip member with no end: everything before message_delta, then the connection drops.
    const truncated = cut.subarray(0, cut.length - 8);
    for (const chunks of splits(truncated)) {
      const { usage } = await runTapDecoded({
        info: messagesRequest,
        headers: { ...SSE, 'content-encoding': 'gzip' },
        chunks,
        complete: false,
      });
      expect(usage).toMatchObject({ input_tokens: 130, source: 'partial' });
    }
  });

  it('answers finish() once and ignores writes after it', () => {
    const tap = createResponseTap(chatRequest, { status: 200, headers: SSE }, { ...CAPS, bodyLogBytes: 10 });
    tap.write(Buffer.from(openAIChatStream({ includeUsage: true })));
    const first = tap.finish(true);
    tap.write(Buffer.from('data: {"usage":{"prompt_tokens":1}}\n\n'));
    expect(tap.finish(false)).toBe(first);
    expect(first.source).toBe('provider');
  });

  it('estimates an OpenAI stream cut before its usage chunk from the request and the text seen', () => {
    const full = openAIChatStream({ includeUsage: true });
    const cut = Buffer.from(full.slice(0, full.indexOf('"choices":[]')));
    const { usage } = runTap({ info: chatRequest, chunks: [cut], complete: false });
    expect(usage.source).toBe('estimated');
    expect(usage.input_tokens).toBeGreaterThan(10);
    expect(usage.output_tokens).toBeGreaterThan(3);
    expect(usage.cache_read_tokens).toBeNull();
    expect(usage.model).toBe('gpt-4o-mini-2024-07-18');
  });

  it('counts streamed text exactly as the tokenizer does, escapes decoded, for every stream shape', () => {
    const deltas = ['He said "hi"\n', '\\ back', 'slash /', ' 世界 🎉', '\u0000end'];
    const expected = countTokens(deltas.join(''), { disallowedSpecial: new Set() });
    const cutBefore = (text: string, marker: string) => Buffer.from(text.slice(0, text.indexOf(marker)));
    const openai = cutBefore(openAIChatStream({ includeUsage: true, deltas }), '"choices":[]');
    expect(runTap({ info: chatRequest, chunks: [openai], complete: false }).usage.output_tokens).toBe(
      expected,
    );
    const anthropic = anthropicStream();
    const withDeltas = anthropic.replace(
      /(event: content_block_delta\ndata: {[^\n]*\n\n)+/,
      deltas
        .map(
          (t) =>
            `event: content_block_delta\ndata: ${JSON.stringify({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: t } })}\n\n`,
        )
        .join(''),
    );
    const cut = cutBefore(withDeltas, 'event: message_delta');
    expect(runTap({ info: messagesRequest, chunks: [cut], complete: false }).usage).toMatchObject({
      source: 'partial',
      output_tokens: expected,
    });
  });

  it('estimates a complete OpenAI stream that carried no usage chunk', () => {
    const bytes = Buffer.from(openAIChatStream({ includeUsage: false }));
    const { usage } = runTap({ info: chatRequest, chunks: [bytes] });
    expect(usage.source).toBe('estimated');
    expect(usage.output_tokens).toBeGreaterThan(3);
    expect(usage.input_tokens).toBeGreaterThan(10);
  });

  it('reads usage from a response.completed event too large to keep whole', () => {
    const text = 'lorem ipsum '.repeat(300_000);
    const completed = {
      type: 'response.completed',
      response: {
        model: 'gpt-4o',
        output: [{ type: 'message', content: [{ type: 'output_text', text }] }],
        usage: { input_tokens: 11, output_tokens: 600_000, output_tokens_details: { reasoning_tokens: 0 } },
      },
    };
    const bytes = Buffer.from(`event: response.completed\ndata: ${JSON.stringify(completed)}\n\n`);
    const chunks = Array.from({ length: Math.ceil(bytes.length / 16384) }, (_v, i) =>
      bytes.subarray(i * 16384, (i + 1) * 16384),
    );
    expect(runTap({ info: responsesRequest, chunks }).usage).toMatchObject({
      input_tokens: 11,
      output_tokens: 600_000,
      source: 'provider',
    });
  });

  it('ignores provider error events and odd data without throwing', () => {
    const bytes = Buffer.from(
      ': comment\n\ndata: not json\n\nevent: error\ndata: {"type":"error","error":{"type":"overloaded_error"}}\n\n',
    );
    expect(runTap({ info: messagesRequest, chunks: [bytes] }).usage.source).toBe('estimated');
  });
});

describe('createResponseTap on JSON bodies', () => {
  const chatJson = {
    id: 'chatcmpl-1',
    object: 'chat.completion',
    model: 'gpt-4o-2024-08-06',
    choices: [{ index: 0, message: { role: 'assistant', content: 'Hi' }, finish_reason: 'stop' }],
    usage: {
      prompt_tokens: 50,
      completion_tokens: 5,
      total_tokens: 55,
      prompt_tokens_details: { cached_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 0 },
    },
  };

  it('reads chat completion usage, also gzip/deflate/br compressed', async () => {
    const info = request('openai', '/v1/chat/completions', { model: 'gpt-4o', messages: [] });
    const raw = json(chatJson);
    const expected = {
      input_tokens: 50,
      cache_read_tokens: 0,
      output_tokens: 5,
      reasoning_tokens: 0,
      source: 'provider',
      model: 'gpt-4o-2024-08-06',
    };
    expect(runTap({ info, headers: JSON_TYPE, chunks: [raw] }).usage).toMatchObject(expected);
    for (const [enc, bytes] of [
      ['gzip', zlib.gzipSync(raw)],
      ['deflate', zlib.deflateSync(raw)],
      ['br', zlib.brotliCompressSync(raw)],
    ] as const) {
      for (const chunks of splits(bytes)) {
        const headers = { ...JSON_TYPE, 'content-encoding': enc };
        expect((await runTapDecoded({ info, headers, chunks })).usage).toMatchObject(expected);
      }
    }
  });

  it('reads Responses API, embeddings and Anthropic message usage', () => {
    const responses = runTap({
      info: request('openai', '/v1/responses', { model: 'o3', input: 'x' }),
      headers: JSON_TYPE,
      chunks: [
        json({
          model: 'o3-2025-04-16',
          usage: {
            input_tokens: 10,
            input_tokens_details: { cached_tokens: 4 },
            output_tokens: 100,
            output_tokens_details: { reasoning_tokens: 80 },
          },
        }),
      ],
    });
    expect(responses.usage).toMatchObject({
      input_tokens: 10,
      cache_read_tokens: 4,
      output_tokens: 100,
      reasoning_tokens: 80,
      source: 'provider',
    });

    const embeddings = runTap({
      info: request('openai', '/v1/embeddings', { model: 'text-embedding-3-small', input: 'hi' }),
      headers: JSON_TYPE,
      chunks: [
        json({
          object: 'list',
          data: [],
          model: 'text-embedding-3-small',
          usage: { prompt_tokens: 7, total_tokens: 7 },
        }),
      ],
    });
    expect(embeddings.usage).toMatchObject({ input_tokens: 7, output_tokens: 0, source: 'provider' });

    const message = runTap({
      info: request('anthropic', '/v1/messages', { model: 'claude-3-5-haiku-latest', messages: [] }),
      headers: JSON_TYPE,
      chunks: [
        json({
          type: 'message',
          model: 'claude-3-5-haiku-20241022',
          content: [{ type: 'text', text: 'Hi' }],
          usage: {
            input_tokens: 3,
            cache_creation_input_tokens: 2000,
            cache_read_input_tokens: 0,
            output_tokens: 9,
          },
        }),
      ],
    });
    expect(message.usage).toMatchObject({
      input_tokens: 2003,
      cache_write_tokens: 2000,
      cache_read_tokens: 0,
      output_tokens: 9,
      source: 'provider',
      model: 'claude-3-5-haiku-20241022',
    });
    expect(message.usage.cache_write_1h_tokens).toBeUndefined();
  });

  it("keeps Anthropic's 1-hour cache writes apart, from a message and from a stream", () => {
    const usage = {
      input_tokens: 3,
      cache_creation_input_tokens: 2000,
      cache_creation: { ephemeral_5m_input_tokens: 1500, ephemeral_1h_input_tokens: 500 },
      cache_read_input_tokens: 0,
      output_tokens: 9,
    };
    const expected = { input_tokens: 2003, cache_write_tokens: 2000, cache_write_1h_tokens: 500 };
    const message = runTap({
      info: request('anthropic', '/v1/messages', { model: 'claude-haiku-4-5', messages: [] }),
      headers: JSON_TYPE,
      chunks: [json({ type: 'message', model: 'claude-haiku-4-5', content: [], usage })],
    });
    expect(message.usage).toMatchObject({ ...expected, source: 'provider' });

    const sse = (event: string, data: object) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
    const streamed = runTap({
      info: request('anthropic', '/v1/messages', { model: 'claude-haiku-4-5', messages: [], stream: true }),
      headers: { 'content-type': 'text/event-stream' },
      chunks: [
        Buffer.from(
          sse('message_start', {
            type: 'message_start',
            message: { model: 'claude-haiku-4-5', usage: { ...usage, output_tokens: 1 } },
          }) +
            sse('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage }) +
            sse('message_stop', { type: 'message_stop' }),
        ),
      ],
    });
    expect(streamed.usage).toMatchObject({ ...expected, output_tokens: 9, source: 'provider' });
  });

  it('says none for non-LLM endpoints and for provider error responses', () => {
    const models = runTap({
      info: parseRequestInfo('openai', '/v1/models', Buffer.alloc(0), undefined),
      headers: JSON_TYPE,
      chunks: [json({ object: 'list', data: [] })],
    });
    expect(models.usage).toEqual({
      input_tokens: null,
      cache_read_tokens: null,
      cache_write_tokens: null,
      output_tokens: null,
      reasoning_tokens: null,
      source: 'none',
      model: null,
    });
    const error = runTap({
      info: messagesRequest,
      status: 529,
      headers: JSON_TYPE,
      chunks: [json({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } })],
    });
    expect(error.usage).toMatchObject({ source: 'none', input_tokens: null, output_tokens: null });
    expect(error.body.text).toContain('overloaded_error');
  });

  it('reads a large body by its members exactly as a whole parse reads it', () => {
    const long = 'Words, "quoted" and {braced} [bracketed] \\ text. '.repeat(200);
    const cases: Array<[RequestInfo, Record<string, unknown>]> = [
      [
        request('openai', '/v1/chat/completions', { model: 'gpt-4o', messages: [] }),
        {
          id: 'x',
          model: 'gpt-4o-2024-08-06',
          choices: [{ message: { role: 'assistant', content: long } }],
          usage: { prompt_tokens: 50, completion_tokens: 5, prompt_tokens_details: { cached_tokens: 32 } },
        },
      ],
      // Usage first, a repeated model (the last one counts), Anthropic's shape.
      [
        messagesRequest,
        {
          usage: { input_tokens: 7, cache_read_input_tokens: 3, output_tokens: 9 },
          model: 'first',
          content: [{ type: 'text', text: long }],
          model_: 1,
        },
      ],
      // A Responses wrapper and a body without usage: the whole parse (wrapper, estimate).
      [
        request('openai', '/v1/responses', { model: 'o3', input: 'x' }),
        {
          response: {
            model: 'o3',
            output: [{ content: [{ text: long }] }],
            usage: { input_tokens: 4, output_tokens: 2 },
          },
        },
      ],
      [
        request('openai', '/v1/chat/completions', {
          model: 'gpt-4o',
          messages: [{ role: 'user', content: 'hi' }],
        }),
        { model: 'gpt-4o', choices: [{ message: { role: 'assistant', content: long } }] },
      ],
      // A transcription's duration beside its text.
      [
        request('openai', '/v1/audio/transcriptions', { model: 'whisper-1' }),
        { task: 'transcribe', duration: 12.5, text: long, segments: [{ text: long }] },
      ],
    ];
    for (const [info, body] of cases) {
      const text = JSON.stringify(body).replace('"model_":1', '"model":"last"');
      expect(text.length).toBeGreaterThan(4096);
      const members = runTap({ info, headers: JSON_TYPE, chunks: [Buffer.from(text)] }).usage;
      const whole = JSON.parse(text) as Record<string, unknown>;
      const inner = (whole.response ?? whole) as Record<string, unknown>;
      expect(members.model).toBe(inner.model ?? null);
      expect(members.source).toBe(inner.usage || inner.duration ? 'provider' : 'estimated');
      if (info === messagesRequest) expect(members).toMatchObject({ model: 'last', input_tokens: 10 });
      if (inner.duration) expect(members.input_audio_seconds).toBe(12.5);
    }
  });

  it('estimates a truncated JSON body instead of reporting zero', () => {
    const raw = json(chatJson);
    const { usage } = runTap({
      info: chatRequest,
      headers: JSON_TYPE,
      chunks: [raw.subarray(0, 40)],
      complete: false,
    });
    expect(usage.source).toBe('estimated');
    expect(usage.input_tokens).toBeGreaterThan(0);
  });

  it('survives corrupt compressed bodies and unknown encodings', async () => {
    const garbage = Buffer.from('definitely not gzip data');
    for (const enc of ['gzip', 'br', 'zstd', 'deflate', 'compress']) {
      const { usage, body } = await runTapDecoded({
        info: chatRequest,
        headers: { ...JSON_TYPE, 'content-encoding': enc },
        chunks: [garbage, garbage],
      });
      expect(['estimated', 'none']).toContain(usage.source);
      expect(body.truncated).toBe(false);
    }
  });

  it('reads usage from the tail of a body too large to keep whole', () => {
    const big = {
      object: 'list',
      model: 'text-embedding-3-small',
      data: Array.from({ length: 25_000 }, (_v, i) => ({
        object: 'embedding',
        index: i,
        embedding: [
          0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9, 2.0,
        ],
      })),
      usage: { prompt_tokens: 4321, total_tokens: 4321 },
    };
    const raw = json(big);
    expect(raw.length).toBeGreaterThan(2 * 1024 * 1024);
    const chunks = Array.from({ length: Math.ceil(raw.length / 65536) }, (_v, i) =>
      raw.subarray(i * 65536, (i + 1) * 65536),
    );
    const info = request('openai', '/v1/embeddings', { model: 'text-embedding-3-small', input: 'x' });
    const { usage, body } = runTap({ info, headers: JSON_TYPE, chunks, bodyLogBytes: 100 });
    expect(usage).toMatchObject({
      input_tokens: 4321,
      output_tokens: 0,
      source: 'provider',
      model: 'text-embedding-3-small',
    });
    expect(body).toEqual({ text: raw.subarray(0, 100).toString(), truncated: true, searchText: null });
  });
});

describe('ResponseTap.body', () => {
  const bytes = Buffer.from(openAIChatStream({ includeUsage: true }));

  it('returns the decoded prefix, never cutting a UTF-8 character in half', () => {
    const at = bytes.indexOf(Buffer.from('世')) + 1; // one byte into a 3-byte character
    const { body } = runTap({ info: chatRequest, chunks: [bytes], bodyLogBytes: at });
    expect(body.truncated).toBe(true);
    expect(body.text).toBe(bytes.subarray(0, at - 1).toString());
  });

  it('returns the whole text when it fits and null when body logging is off', () => {
    expect(runTap({ info: chatRequest, chunks: [bytes] }).body).toMatchObject({
      text: bytes.toString(),
      truncated: false,
    });
    expect(runTap({ info: chatRequest, chunks: [bytes], bodyLogBytes: 0 }).body).toEqual({
      text: null,
      truncated: false,
      searchText: null,
    });
  });

  it("gives a stream's search text: its first event, then the streamed text with words whole", () => {
    const { body } = runTap({ info: chatRequest, chunks: [...splits(bytes)].at(-1)! });
    const firstEvent = bytes.toString().split('\n\n')[0]!;
    expect(body.searchText).toBe(`${firstEvent}\n${DELTAS.join('')}`);
    expect(body.searchText).toContain('Héllo');
    expect(body.text).not.toContain('Héllo'); // the frames split it
    const anthropic = runTap({ info: messagesRequest, chunks: [Buffer.from(anthropicStream())] }).body;
    expect(anthropic.searchText).toMatch(/^event: message_start\ndata: .*"id":"msg_1".*\n/);
  });

  it("holds no more of the answer in a stream's search text than the logged body holds", () => {
    const events = bytes.toString().split('\n\n');
    const twoEvents = Buffer.byteLength(`${events[0]}\n\n${events[1]}\n\n`);
    const oneByteAtATime = [...splits(bytes)].at(-1)!;
    const { body } = runTap({ info: chatRequest, chunks: oneByteAtATime, bodyLogBytes: twoEvents });
    expect(body.truncated).toBe(true);
    expect(body.searchText).toBe(`${events[0]}\nHél`);
  });

  it("keeps a stream's search text within the body log's limit, and gives none without text", () => {
    expect(runTap({ info: chatRequest, chunks: [bytes], bodyLogBytes: 40 }).body.searchText).toHaveLength(40);
    const noText = Buffer.from(openAIChatStream({ includeUsage: true, deltas: [] }));
    expect(runTap({ info: chatRequest, chunks: [noText] }).body.searchText).toBeNull();
  });

  it('keeps the stream text even for the deltas containing emoji', () => {
    const { body } = runTap({ info: chatRequest, chunks: [...splits(bytes)].at(-1)! });
    for (const d of DELTAS) expect(body.text).toContain(JSON.stringify(d).slice(1, -1));
  });
});

describe('createResponseTap limits', () => {
  it('stops decoding a compressed body at maxDecodedBytes and estimates instead of failing', async () => {
    const body = json({
      id: 'x',
      object: 'chat.completion',
      model: 'gpt-4o-mini',
      choices: [{ index: 0, message: { role: 'assistant', content: 'w '.repeat(600_000) } }],
      usage: { prompt_tokens: 11, completion_tokens: 600_000, total_tokens: 600_011 },
    });
    const headers = { 'content-type': 'application/json', 'content-encoding': 'gzip' };
    const packed = zlib.gzipSync(body);
    const read = async (maxDecodedBytes: number) => {
      const tap = createResponseTap(
        chatRequest,
        { status: 200, headers },
        { ...CAPS, bodyLogBytes: 100, maxDecodedBytes },
      );
      for (let i = 0; i < packed.length; i += 1000) tap.write(packed.subarray(i, i + 1000));
      await tap.drained();
      return { usage: tap.finish(true), body: tap.body() };
    };
    expect((await read(CAPS.maxDecodedBytes)).usage).toMatchObject({
      source: 'provider',
      output_tokens: 600_000,
    });
    const capped = await read(64 * 1024);
    expect(capped.usage.source).toBe('estimated');
    expect(capped.body).toEqual({
      text: body.subarray(0, 100).toString(),
      truncated: true,
      searchText: null,
    });
  });
});

describe('createResponseTap reads why a response ended (gen_ai.response.finish_reasons)', () => {
  const usage = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 };
  const choice = (index: number, reason: string, content: string) => ({
    index,
    message: { role: 'assistant', content },
    finish_reason: reason,
  });

  it('reads each choice of a chat body, small (parsed whole) and large (read by its members)', () => {
    const info = request('openai', '/v1/chat/completions', { model: 'gpt-4o-mini', n: 2, messages: [] });
    for (const content of ['short', 'x'.repeat(8000)]) {
      const body = {
        model: 'gpt-4o-mini',
        // A reason-shaped text inside a string is no member: the text scan must not take it.
        choices: [choice(0, 'stop', `${content} "finish_reason":"fake"`), choice(1, 'length', content)],
        usage,
      };
      const { usage: u } = runTap({ info, headers: JSON_TYPE, chunks: [json(body)] });
      expect(u.source).toBe('provider');
      expect(u.finish_reasons).toEqual(['stop', 'length']);
    }
  });

  it('reads the last chunk of each streamed choice, and Anthropic and Responses streams', () => {
    expect(
      runTap({ info: chatRequest, chunks: [Buffer.from(openAIChatStream({ includeUsage: true }))] }).usage
        .finish_reasons,
    ).toEqual(['stop']);
    expect(
      runTap({ info: messagesRequest, chunks: [Buffer.from(anthropicStream())] }).usage.finish_reasons,
    ).toEqual(['end_turn']);
    expect(
      runTap({ info: responsesRequest, chunks: [Buffer.from(openAIResponsesStream())] }).usage.finish_reasons,
    ).toEqual(['completed']);
  });

  it('leaves the reasons out where the response named none', () => {
    const info = request('openai', '/v1/embeddings', { model: 'text-embedding-3-small', input: 'a' });
    const body = { object: 'list', data: [], model: 'text-embedding-3-small', usage };
    expect(runTap({ info, headers: JSON_TYPE, chunks: [json(body)] }).usage.finish_reasons).toBeUndefined();
  });
});
