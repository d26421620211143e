/**
 * Every billed OpenAI endpoint priced from what the provider returns: audio
 * transcriptions, translations and speech, images, moderations; listings not billed; unknown prices
 * unpriced (null, never $0). Driven by the official SDK; each expected cost is computed here from the
 * fake's numbers with the price library, never copied from keyrelay.
 */
import { calcPrice } from '@pydantic/genai-prices';
import OpenAI, { toFile } from 'openai';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setKeyLimits } from '../src/keys/actions.js';
import type { RequestLogRow } from '../src/types.js';
import {
  FAKE_AUDIO_SECONDS,
  FAKE_IMAGE_USAGE,
  FAKE_MEDIA_BYTES,
  FAKE_SPEECH_USAGE,
  FAKE_TRANSCRIBE_USAGE,
} from './fakes/openai-media.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';

let h: Harness;
let user: { key: string; keyId: string; accountId: string };
let client: OpenAI;

beforeAll(async () => {
  // Small enough that a streamed image's completed event is read from its head and tail only.
  h = await startHarness({}, { sseEventBytes: 1024 });
  user = await h.newUser();
  client = new OpenAI({
    apiKey: 'sk-test-canary-openai',
    baseURL: `${h.url}/api/proxy/openai/v1`,
    maxRetries: 0,
    defaultHeaders: { 'proxy-api-key': user.key },
  });
});
afterAll(() => h.close());

async function row(response: Response): Promise<RequestLogRow> {
  const id = response.headers.get('x-keyrelay-request-id');
  expect(id).toBeTruthy();
  // The row is built after the last byte (a compressed stream's usage once its decoder is through), so the
  // client can be done before the row is queued: flushed and asked again until it is there.
  let r: RequestLogRow | null = null;
  await expect
    .poll(
      async () => {
        await h.flushLog();
        r = await h.kr.services.logStore.getRequest(user.accountId, id!);
        return r;
      },
      { timeout: 10_000, message: `row ${id}` },
    )
    .not.toBeNull();
  return r!;
}

const price = (model: string, usage: Record<string, number>): number => {
  const r = calcPrice(usage, model, { providerId: 'openai' });
  expect(r, `the library prices ${model}`).not.toBeNull();
  return r!.total_price;
};
const hourlyRate = (model: string): number => {
  const prices = calcPrice({ input_tokens: 0, output_tokens: 0 }, model, { providerId: 'openai' })!
    .model_price as Record<string, number>;
  expect(prices.input_audio_hours).toBeGreaterThan(0);
  return prices.input_audio_hours!;
};
const audio = () => toFile(FAKE_MEDIA_BYTES, 'speech.mp3', { type: 'audio/mpeg' });

const TRANSCRIBE = {
  input_tokens: FAKE_TRANSCRIBE_USAGE.text_tokens + FAKE_TRANSCRIBE_USAGE.audio_tokens,
  input_audio_tokens: FAKE_TRANSCRIBE_USAGE.audio_tokens,
  output_tokens: FAKE_TRANSCRIBE_USAGE.output_tokens,
};

describe('audio', () => {
  it('prices a token-billed transcription from its usage, the upload read for its model', async () => {
    const { data, response } = await client.audio.transcriptions
      .create({ file: await audio(), model: 'gpt-4o-transcribe' })
      .withResponse();
    expect(data.text).toContain('Hello');
    const r = await row(response);
    expect(r).toMatchObject({
      model: 'gpt-4o-transcribe',
      input_tokens: TRANSCRIBE.input_tokens,
      output_tokens: TRANSCRIBE.output_tokens,
      input_audio_tokens: null,
      usage_source: 'provider',
    });
    expect(r.cost_usd).toBeCloseTo(price('gpt-4o-transcribe', TRANSCRIBE), 12);
    expect(r.price_source).toMatch(/^genai-prices@/);
  });

  it('prices a streamed transcription from transcript.text.done, also gzip-compressed', async () => {
    for (const encoding of ['identity', 'gzip']) {
      const { data: stream, response } = await client.audio.transcriptions
        .create(
          { file: await audio(), model: 'gpt-4o-mini-transcribe', stream: true },
          { headers: encoding === 'gzip' ? { 'x-fake-encoding': 'gzip' } : {} },
        )
        .withResponse();
      const types: string[] = [];
      for await (const event of stream) types.push(event.type);
      expect(types.at(-1)).toBe('transcript.text.done');
      const r = await row(response);
      expect(r, encoding).toMatchObject({
        stream: true,
        input_tokens: TRANSCRIBE.input_tokens,
        usage_source: 'provider',
      });
      expect(r.cost_usd).toBeCloseTo(price('gpt-4o-mini-transcribe', TRANSCRIBE), 12);
    }
  });

  it('prices whisper-1 by the duration the response reports, at the library’s hourly rate', async () => {
    const { response } = await client.audio.transcriptions
      .create({ file: await audio(), model: 'whisper-1', response_format: 'verbose_json' })
      .withResponse();
    const r = await row(response);
    expect(r).toMatchObject({ model: 'whisper-1', input_tokens: null, usage_source: 'provider' });
    expect(r.cost_usd).toBeCloseTo((FAKE_AUDIO_SECONDS / 3600) * hourlyRate('whisper-1'), 12);
    expect(r.price_source).toMatch(/^genai-prices@.* input_audio_hours$/);

    const translated = await client.audio.translations
      .create(
        { file: await audio(), model: 'whisper-1', response_format: 'verbose_json' },
        { headers: { 'x-fake-usage': '{"seconds":90}' } },
      )
      .withResponse();
    const t = await row(translated.response);
    expect(t.cost_usd).toBeCloseTo((90 / 3600) * hourlyRate('whisper-1'), 12);
  });

  it('leaves a translation whose response reports no duration unpriced, never $0', async () => {
    const { response } = await client.audio.translations
      .create({ file: await audio(), model: 'whisper-1', response_format: 'text' })
      .withResponse();
    const r = await row(response);
    expect(r.cost_usd).toBeNull();
    expect(r.usage_source).toBe('none');
    expect(r.price_source).toMatch(/^unpriced: the response reported no usage/);
  });

  it('prices streamed gpt-4o-mini-tts speech from speech.audio.done; plain speech bytes are unpriced', async () => {
    const { data: stream, response } = await client.audio.speech
      .create({ model: 'gpt-4o-mini-tts', voice: 'alloy', input: 'Say hi', stream_format: 'sse' })
      .withResponse();
    await stream.text();
    const r = await row(response);
    expect(r).toMatchObject({
      input_tokens: FAKE_SPEECH_USAGE.input_tokens,
      output_tokens: FAKE_SPEECH_USAGE.output_tokens,
    });
    expect(r.cost_usd).toBeCloseTo(price('gpt-4o-mini-tts', FAKE_SPEECH_USAGE), 12);

    const plain = await client.audio.speech
      .create({ model: 'tts-1', voice: 'alloy', input: 'Say hi' })
      .withResponse();
    expect(Buffer.from(await plain.data.arrayBuffer())).toEqual(FAKE_MEDIA_BYTES);
    const p = await row(plain.response);
    expect(p).toMatchObject({ model: 'tts-1', cost_usd: null, usage_source: 'none' });
    expect(p.price_source).toMatch(/^unpriced:/);
  });
});

describe('images', () => {
  const generated = {
    input_tokens: FAKE_IMAGE_USAGE.text_tokens,
    output_tokens: FAKE_IMAGE_USAGE.output_tokens,
  };

  it('prices gpt-image-1 generations and edits from usage, image input at its own rate', async () => {
    const gen = await client.images.generate({ model: 'gpt-image-1', prompt: 'a cat' }).withResponse();
    const g = await row(gen.response);
    expect(g).toMatchObject({ input_tokens: generated.input_tokens, output_tokens: generated.output_tokens });
    expect(g.cost_usd).toBeCloseTo(price('gpt-image-1', generated), 12);

    const edit = await client.images
      .edit({
        model: 'gpt-image-1',
        prompt: 'a hat',
        image: await toFile(FAKE_MEDIA_BYTES, 'cat.png', { type: 'image/png' }),
      })
      .withResponse();
    const e = await row(edit.response);
    const edited = {
      input_tokens: FAKE_IMAGE_USAGE.text_tokens + FAKE_IMAGE_USAGE.image_tokens,
      input_image_tokens: FAKE_IMAGE_USAGE.image_tokens,
      output_tokens: FAKE_IMAGE_USAGE.output_tokens,
    };
    expect(e).toMatchObject({ model: 'gpt-image-1', input_tokens: edited.input_tokens });
    expect(e.cost_usd).toBeCloseTo(price('gpt-image-1', edited), 12);
    expect(e.cost_usd).toBeGreaterThan(price('gpt-image-1', { ...edited, input_image_tokens: 0 }));
  });

  it('prices a streamed generation whose events are larger than the SSE event limit', async () => {
    const { data: stream, response } = await client.images
      .generate({ model: 'gpt-image-1', prompt: 'a cat', stream: true, partial_images: 2 })
      .withResponse();
    const types: string[] = [];
    for await (const event of stream) types.push(event.type);
    expect(types).toEqual([
      'image_generation.partial_image',
      'image_generation.partial_image',
      'image_generation.completed',
    ]);
    const r = await row(response);
    expect(r.cost_usd).toBeCloseTo(price('gpt-image-1', generated), 12);
  });

  it('leaves DALL·E images unpriced (the library has no per-image prices), never $0', async () => {
    const { response } = await client.images.generate({ model: 'dall-e-3', prompt: 'a cat' }).withResponse();
    const r = await row(response);
    expect(r).toMatchObject({ model: 'dall-e-3', cost_usd: null, usage_source: 'none' });
    expect(r.price_source).toMatch(/^unpriced:/);
  });
});

describe('free and not billed', () => {
  it('moderations cost a known 0; listings cost 0 and are not usage', async () => {
    const mod = await client.moderations
      .create({ model: 'omni-moderation-latest', input: 'hi' })
      .withResponse();
    const m = await row(mod.response);
    expect(m).toMatchObject({ cost_usd: 0, usage_source: 'none', input_tokens: null });
    expect(m.price_source).toMatch(/^genai-prices@.*moderations are free/);
    const models = await client.models.list().withResponse();
    const l = await row(models.response);
    expect(l).toMatchObject({ cost_usd: 0, price_source: 'not billed', usage_source: 'none' });
  });

  it('shows unpriced counts in the usage summary: unpriced billed calls, not listings or errors', async () => {
    const fresh = await h.newUser();
    const c = new OpenAI({
      apiKey: 'sk-x',
      baseURL: `${h.url}/api/proxy/openai/v1`,
      maxRetries: 0,
      defaultHeaders: { 'proxy-api-key': fresh.key },
    });
    await c.images.generate({ model: 'dall-e-3', prompt: 'a cat' });
    await c.models.list();
    await expect(c.models.list({ headers: { 'x-fake-status': '500' } })).rejects.toThrow();
    await c.moderations.create({ model: 'omni-moderation-latest', input: 'hi' });
    await h.flushLog();
    const [point] = await h.kr.services.logStore.usageBreakdown({ account_id: fresh.accountId }, 'provider');
    expect(point).toMatchObject({ requests: 4, unknown_cost_requests: 1, cost_usd: 0 });
  });
});

describe('uploads', () => {
  it('applies model limits to a multipart upload, read for its model', async () => {
    const limited = await h.newUser();
    await setKeyLimits({ store: h.kr.services.configStore, bus: h.kr.services.bus }, null, limited.keyId, {
      allowed_models: ['gpt-4o-transcribe'],
    });
    const upload = async (model: string) => {
      const res = await request(`${h.url}/api/proxy/openai/v1/audio/transcriptions`, {
        method: 'POST',
        headers: { 'proxy-api-key': limited.key, 'content-type': 'multipart/form-data; boundary=XyZ' },
        body: `--XyZ\r\nContent-Disposition: form-data; name="model"\r\n\r\n${model}\r\n--XyZ\r\nContent-Disposition: form-data; name="file"; filename="a.mp3"\r\nContent-Type: audio/mpeg\r\n\r\nabc\r\n--XyZ--\r\n`,
      });
      await res.body.text();
      return res.statusCode;
    };
    expect(await upload('whisper-1')).toBe(403);
    expect(await upload('gpt-4o-transcribe')).toBe(200);
  });

  it('reads an upload as servers do, and refuses one they could read two ways: never the forbidden model upstream', async () => {
    const limited = await h.newUser();
    await setKeyLimits({ store: h.kr.services.configStore, bus: h.kr.services.bus }, null, limited.keyId, {
      allowed_models: ['gpt-4o-transcribe'],
    });
    const file =
      '--XyZ\r\nContent-Disposition: form-data; name="file"; filename="a.mp3"\r\nContent-Type: audio/mpeg\r\n\r\nabc\r\n';
    const field = (name: string, value: string) =>
      `--XyZ\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`;
    const ct = 'multipart/form-data; boundary=XyZ';
    // Each reads as gpt-4o-transcribe to a first-match reader, as o1-pro to undici's and Node's.
    const crafted: [string, string, string][] = [
      [
        'two boundary parameters',
        'multipart/form-data; boundary=XyZ; boundary=AbC',
        field('model', 'gpt-4o-transcribe') +
          '--XyZ--\r\n' +
          '--AbC\r\nContent-Disposition: form-data; name="model"\r\n\r\no1-pro\r\n--AbC--\r\n',
      ],
      [
        'a delimiter in the preamble',
        ct,
        `preamble--XyZ\r\nContent-Disposition: form-data; name="model"\r\n\r\ngpt-4o-transcribe\r\n${field('model', 'o1-pro')}${file}--XyZ--\r\n`,
      ],
      [
        'two dispositions in a part',
        ct,
        `--XyZ\r\nContent-Disposition: form-data; name="model"\r\nContent-Disposition: form-data; name="note"\r\n\r\ngpt-4o-transcribe\r\n${field('model', 'o1-pro')}${file}--XyZ--\r\n`,
      ],
      [
        'an unquoted name',
        ct,
        `--XyZ\r\nContent-Disposition: form-data; name=model\r\n\r\no1-pro\r\n${field('model', 'gpt-4o-transcribe')}${file}--XyZ--\r\n`,
      ],
      [
        'two model fields',
        ct,
        `${field('model', 'gpt-4o-transcribe')}${field('model', 'o1-pro')}${file}--XyZ--\r\n`,
      ],
    ];
    const passed: string[] = [];
    for (const [what, type, body] of crafted) {
      const before = h.openai.requests.length;
      const res = await request(`${h.url}/api/proxy/openai/v1/audio/transcriptions`, {
        method: 'POST',
        headers: { 'proxy-api-key': limited.key, 'content-type': type },
        body,
      });
      const text = await res.body.text();
      if (h.openai.requests.length !== before) passed.push(what);
      else
        expect(JSON.parse(text), what).toMatchObject({
          error: { code: expect.stringMatching(/^proxy_/) as unknown },
        });
    }
    expect(passed).toEqual([]);
  });

  it('refuses a malformed multipart body with a clear 400 and a logged row, without reaching upstream', async () => {
    const before = h.openai.requests.length;
    const res = await request(`${h.url}/api/proxy/openai/v1/audio/transcriptions`, {
      method: 'POST',
      headers: { 'proxy-api-key': user.key, 'content-type': 'multipart/form-data; boundary=XyZ' },
      body: '--XyZ\r\nContent-Disposition: form-data; name="model"\r\n\r\nwhisper-1\r\n--Xy',
    });
    const body = (await res.body.json()) as { error: { message: string; code: string } };
    expect(res.statusCode).toBe(400);
    expect(body.error.message).toMatch(/multipart/i);
    expect(h.openai.requests.length).toBe(before);
    await h.flushLog();
    const r = await h.kr.services.logStore.getRequest(
      user.accountId,
      String(res.headers['x-keyrelay-request-id']),
    );
    expect(r).toMatchObject({
      status: 400,
      error_code: 'proxy_bad_request',
      price_source: 'not billed: no successful response',
    });
  });
});
