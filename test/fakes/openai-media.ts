/**
 * The fake OpenAI's audio, image and moderation endpoints, with bodies and streams shaped as
 * https://platform.openai.com/docs/api-reference documents them (usage objects included).
 */
import type { Scenario } from './scenario.js';
import {
  FAKE_CREATED,
  deriveId,
  jsonResponse,
  parseJsonBody,
  sseResponse,
  textDeltas,
  type FakeRequest,
  type Headers,
  type RenderedResponse,
} from './render.js';

/** Token usage of a gpt-4o(-mini)-transcribe call (`x-fake-usage` keys override). */
export const FAKE_TRANSCRIBE_USAGE = { text_tokens: 20, audio_tokens: 100, output_tokens: 30 };
/** Seconds of audio the fake reports for whisper-1 (`x-fake-usage: {"seconds": n}` overrides). */
export const FAKE_AUDIO_SECONDS = 42;
/** gpt-4o-mini-tts streamed speech usage. */
export const FAKE_SPEECH_USAGE = { input_tokens: 14, output_tokens: 101 };
/** gpt-image-1 usage: generations have no image input, edits do. */
export const FAKE_IMAGE_USAGE = { text_tokens: 50, image_tokens: 323, output_tokens: 4160 };
/** A tiny valid-looking payload standing in for audio and image bytes. */
export const FAKE_MEDIA_BYTES = Buffer.from('ID3\u0004\u0000\u0000fake-audio-frame-'.repeat(64), 'latin1');

/** The text fields of a multipart/form-data body (a fake's own reading, independent of keyrelay's). */
export function multipartFields(req: FakeRequest): Record<string, string> | undefined {
  const type = String(req.headers['content-type'] ?? '');
  const boundary = /boundary=(?:"([^"]+)"|([^\s;]+))/i.exec(type);
  if (!type.startsWith('multipart/form-data') || !boundary) return undefined;
  const text = req.body.toString('latin1');
  const delimiter = `--${boundary[1] ?? boundary[2]}`;
  if (!text.includes(`${delimiter}--`)) return undefined;
  const out: Record<string, string> = {};
  for (const part of text.split(delimiter).slice(1, -1)) {
    const [head, ...rest] = part.split('\r\n\r\n');
    const name = /name="([^"]*)"/.exec(head ?? '')?.[1];
    if (name && !/filename=/.test(head ?? ''))
      out[name] = Buffer.from(rest.join('\r\n\r\n').replace(/\r\n$/, ''), 'latin1').toString('utf8');
  }
  return out;
}

const n = (scenario: Scenario, key: string, fallback: number): number => scenario.usage?.[key] ?? fallback;
const data = (value: unknown): string => `data: ${JSON.stringify(value)}\n\n`;
const typed = (value: { type: string; [k: string]: unknown }): string =>
  `event: ${value.type}\ndata: ${JSON.stringify(value)}\n\n`;

function badMultipart(error: (status: number, message: string) => RenderedResponse): RenderedResponse {
  return error(400, 'Could not parse multipart form');
}

export function renderTranscription(
  req: FakeRequest,
  scenario: Scenario,
  headers: Headers,
  translate: boolean,
  error: (status: number, message: string) => RenderedResponse,
): RenderedResponse {
  const f = multipartFields(req);
  if (!f) return badMultipart(error);
  const model = f.model ?? 'whisper-1';
  const format = f.response_format ?? 'json';
  const text = textDeltas(4).join('');
  const byDuration = model === 'whisper-1';
  const seconds = n(scenario, 'seconds', FAKE_AUDIO_SECONDS);
  const tokens = {
    type: 'tokens',
    input_tokens:
      n(scenario, 'text_tokens', FAKE_TRANSCRIBE_USAGE.text_tokens) +
      n(scenario, 'audio_tokens', FAKE_TRANSCRIBE_USAGE.audio_tokens),
    input_token_details: {
      text_tokens: n(scenario, 'text_tokens', FAKE_TRANSCRIBE_USAGE.text_tokens),
      audio_tokens: n(scenario, 'audio_tokens', FAKE_TRANSCRIBE_USAGE.audio_tokens),
    },
    output_tokens: n(scenario, 'output_tokens', FAKE_TRANSCRIBE_USAGE.output_tokens),
    total_tokens: 0,
  };
  tokens.total_tokens = tokens.input_tokens + tokens.output_tokens;
  const usage = byDuration ? { type: 'duration', seconds } : tokens;
  if (f.stream === 'true' && !byDuration) {
    const pieces = textDeltas(4).map((delta) => data({ type: 'transcript.text.delta', delta, logprobs: [] }));
    pieces.push(data({ type: 'transcript.text.done', text, logprobs: [], usage }));
    return sseResponse(headers, pieces);
  }
  if (format === 'text' || format === 'srt' || format === 'vtt') {
    return {
      status: 200,
      headers: { 'content-type': 'text/plain; charset=utf-8', ...headers },
      pieces: [`${text}\n`],
      stream: false,
    };
  }
  if (format === 'verbose_json') {
    // Translations' verbose body has no usage member: its cost comes from `duration`.
    return jsonResponse(200, headers, {
      task: translate ? 'translate' : 'transcribe',
      language: 'english',
      duration: seconds,
      text,
      segments: [
        {
          id: 0,
          seek: 0,
          start: 0,
          end: seconds,
          text,
          tokens: [50364, 2425],
          temperature: 0,
          avg_logprob: -0.2,
          compression_ratio: 1.1,
          no_speech_prob: 0.01,
        },
      ],
      ...(translate ? {} : { usage }),
    });
  }
  return jsonResponse(200, headers, translate ? { text } : { text, usage });
}

export function renderSpeech(req: FakeRequest, scenario: Scenario, headers: Headers): RenderedResponse {
  const body = parseJsonBody(req.body) ?? {};
  if (body.stream_format === 'sse') {
    const audio = FAKE_MEDIA_BYTES.toString('base64');
    const pieces = [0, 1, 2].map(() => data({ type: 'speech.audio.delta', audio }));
    const input = n(scenario, 'input_tokens', FAKE_SPEECH_USAGE.input_tokens);
    const output = n(scenario, 'output_tokens', FAKE_SPEECH_USAGE.output_tokens);
    pieces.push(
      data({
        type: 'speech.audio.done',
        usage: { input_tokens: input, output_tokens: output, total_tokens: input + output },
      }),
    );
    return sseResponse(headers, pieces);
  }
  const format = typeof body.response_format === 'string' ? body.response_format : 'mp3';
  const type = format === 'mp3' ? 'audio/mpeg' : `audio/${format}`;
  return {
    status: 200,
    headers: { 'content-type': type, ...headers },
    pieces: [FAKE_MEDIA_BYTES.toString('latin1')],
    stream: false,
  };
}

export function renderImages(
  req: FakeRequest,
  scenario: Scenario,
  headers: Headers,
  edit: boolean,
  error: (status: number, message: string) => RenderedResponse,
): RenderedResponse {
  const fields = edit ? multipartFields(req) : parseJsonBody(req.body);
  if (!fields) return badMultipart(error);
  const model = typeof fields.model === 'string' ? fields.model : 'dall-e-2';
  const b64 = FAKE_MEDIA_BYTES.toString('base64');
  if (!model.startsWith('gpt-image')) {
    // DALL·E: no usage in the body; billed per image by model, size and quality.
    return jsonResponse(200, headers, {
      created: FAKE_CREATED,
      data: [
        {
          url: `https://oaidalleapiprodscus.blob.core.windows.net/private/img-${deriveId(req, 12)}.png`,
          revised_prompt: 'A fake picture.',
        },
      ],
    });
  }
  const text = n(scenario, 'text_tokens', FAKE_IMAGE_USAGE.text_tokens);
  const image = edit ? n(scenario, 'image_tokens', FAKE_IMAGE_USAGE.image_tokens) : 0;
  const output = n(scenario, 'output_tokens', FAKE_IMAGE_USAGE.output_tokens);
  const usage = {
    input_tokens: text + image,
    input_tokens_details: { image_tokens: image, text_tokens: text },
    output_tokens: output,
    total_tokens: text + image + output,
  };
  const meta = { size: '1024x1024', quality: 'high', background: 'opaque', output_format: 'png' };
  if (fields.stream === true || fields.stream === 'true') {
    const prefix = edit ? 'image_edit' : 'image_generation';
    const pieces = [0, 1].map((i) =>
      typed({
        type: `${prefix}.partial_image`,
        b64_json: b64,
        created_at: FAKE_CREATED,
        ...meta,
        partial_image_index: i,
      }),
    );
    pieces.push(
      typed({ type: `${prefix}.completed`, b64_json: b64, created_at: FAKE_CREATED, ...meta, usage }),
    );
    return sseResponse(headers, pieces);
  }
  return jsonResponse(200, headers, { created: FAKE_CREATED, ...meta, data: [{ b64_json: b64 }], usage });
}

const CATEGORIES = ['harassment', 'hate', 'illicit', 'self-harm', 'sexual', 'violence'];

export function renderModeration(req: FakeRequest, headers: Headers): RenderedResponse {
  const body = parseJsonBody(req.body) ?? {};
  const inputs = Array.isArray(body.input) ? body.input : [body.input];
  return jsonResponse(200, headers, {
    id: `modr-${deriveId(req, 16)}`,
    model:
      typeof body.model === 'string'
        ? `${body.model}-2024-09-26`.replace(/-latest-2024-09-26$/, '-2024-09-26')
        : 'omni-moderation-2024-09-26',
    results: inputs.map(() => ({
      flagged: false,
      categories: Object.fromEntries(CATEGORIES.map((c) => [c, false])),
      category_scores: Object.fromEntries(CATEGORIES.map((c) => [c, 0.0001])),
      category_applied_input_types: Object.fromEntries(CATEGORIES.map((c) => [c, ['text']])),
    })),
  });
}
