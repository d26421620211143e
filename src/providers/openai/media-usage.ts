/**
 * OpenAI's audio and image endpoints: transcriptions and translations, speech, image generations and edits.
 * Their usage objects differ from chat's (`input_tokens` with `input_token(s)_details`, or a duration), and
 * their streams are typed events whose big payloads (base64 audio and images) are never parsed.
 */
import {
  addStringFields,
  findUsageObject,
  isRecord,
  num,
  type OutputCounter,
  type Reported,
  type SseEventReader,
  sub,
  type TokenCounts,
  type UsageReader,
} from '../../usage/index.js';

const NO_TOKENS: TokenCounts = {
  input_tokens: null,
  cache_read_tokens: null,
  cache_write_tokens: null,
  output_tokens: null,
  reasoning_tokens: null,
};

/**
 * A media usage object: tokens (`{input_tokens, output_tokens, input_token_details | input_tokens_details}`)
 * or, for models billed by the length of the audio (whisper-1), `{type: "duration", seconds}`.
 */
export function normalizeMediaUsage(u: unknown): TokenCounts | null {
  if (!isRecord(u)) return null;
  if (u.type === 'duration') {
    const seconds = num(u.seconds);
    return seconds === null ? null : { ...NO_TOKENS, input_audio_seconds: seconds };
  }
  const input = num(u.input_tokens);
  if (input === null) return null;
  // Transcriptions say input_token_details, images input_tokens_details.
  const details = isRecord(u.input_tokens_details) ? u.input_tokens_details : u.input_token_details;
  const audio = num(sub(details, 'audio_tokens'));
  const image = num(sub(details, 'image_tokens'));
  const cached = num(sub(details, 'cached_tokens'));
  return {
    input_tokens: input,
    cache_read_tokens: cached ?? 0,
    cache_write_tokens: 0,
    output_tokens: num(u.output_tokens) ?? 0,
    reasoning_tokens: null,
    ...(audio ? { input_audio_tokens: audio } : {}),
    ...(image ? { input_image_tokens: image } : {}),
  };
}

/** A transcription's `usage`, else (older bodies, verbose_json) the `duration` it reports. */
function transcriptionJson(
  usage: unknown,
  body?: Record<string, unknown>,
): { counts: TokenCounts | null; final: boolean } {
  let counts = normalizeMediaUsage(usage);
  const duration = num(body?.duration);
  if (counts === null && duration !== null) counts = { ...NO_TOKENS, input_audio_seconds: duration };
  return { counts, final: counts !== null };
}

function mediaJson(usage: unknown): { counts: TokenCounts | null; final: boolean } {
  const counts = normalizeMediaUsage(usage);
  return { counts, final: counts !== null };
}

const DELTA_FIELD = /"delta"\s*:\s*"/g;

/**
 * Typed media events: `skipped` names the frequent (or huge) events read without a parse; the one that
 * ends the stream (`transcript.text.done`, `speech.audio.done`, `image_*.completed`) carries `usage`.
 */
class MediaStream implements SseEventReader {
  private counts: TokenCounts | null = null;
  constructor(
    private readonly output: OutputCounter,
    private readonly skipped: RegExp,
    private readonly textDelta: string | null,
  ) {}
  skim(_event: string, data: string): boolean {
    if (this.textDelta !== null && data.includes(this.textDelta)) {
      addStringFields(data, DELTA_FIELD, this.output);
      return true;
    }
    return this.skipped.test(data.slice(0, 200)) && !data.includes('"usage"');
  }
  onEvent(data: Record<string, unknown>): void {
    if (
      typeof data.type === 'string' &&
      data.type === this.textDelta?.slice(1, -1) &&
      typeof data.delta === 'string'
    )
      this.output.add(data.delta);
    if (isRecord(data.usage)) this.counts = normalizeMediaUsage(data.usage) ?? this.counts;
  }
  onClipped(data: string): void {
    // A completed image event holds the whole image before its usage: the usage sits in the tail.
    this.counts = normalizeMediaUsage(findUsageObject(data)) ?? this.counts;
  }
  reported(): Reported {
    return { counts: this.counts, model: null, final: this.counts !== null };
  }
}

export const TRANSCRIPTION_USAGE: UsageReader = {
  json: transcriptionJson,
  bodyMembers: ['duration'],
  sse: (o) => new MediaStream(o, /^$/, '"transcript.text.delta"'),
  generatesOutput: true,
  estimable: false,
};

export const SPEECH_USAGE: UsageReader = {
  json: mediaJson,
  sse: (o) => new MediaStream(o, /"speech\.audio\.delta"/, null),
  generatesOutput: true,
  estimable: false,
};

export const IMAGES_USAGE: UsageReader = {
  json: mediaJson,
  sse: (o) => new MediaStream(o, /\.partial_image"/, null),
  generatesOutput: true,
  estimable: false,
};
