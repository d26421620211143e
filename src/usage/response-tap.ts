/**
 * Reads usage from a response as it passes: a JSON body at the end, an SSE stream event by event. Only
 * observes; never throws into the proxy (a body it cannot read yields an estimate or `none`).
 */
import { BodyPrefix, HeadTail } from './body-buffers.js';
import { createBodyDecoder, isCompressed, type BodyDecoder } from './decoder.js';
import { collectResponseText, estimateRequestTokens, OutputCounter } from './estimate.js';
import { readTopLevelMembers } from './json-members.js';
import { findUsageObject, isRecord, modelInHead } from './normalize.js';
import { createStreamReader, type StreamReader } from './stream-reader.js';
import type { ParsedRequest, Reported, ResponseTap, TokenCounts, Usage, UsageReader } from './types.js';

/** JSON bodies up to this size are parsed whole; larger ones (big embedding batches) by their tail. */
const MAX_JSON_BYTES = 2 * 1024 * 1024;
const JSON_EDGE_BYTES = 256 * 1024;

type Headers = Record<string, string | string[] | undefined>;

function header(headers: Headers, name: string): string | undefined {
  let v = headers[name];
  if (v === undefined) {
    const key = Object.keys(headers).find((k) => k.toLowerCase() === name);
    v = key === undefined ? undefined : headers[key];
  }
  return Array.isArray(v) ? v.join(', ') : v;
}

const NO_TOKENS: TokenCounts = {
  input_tokens: null,
  cache_read_tokens: null,
  cache_write_tokens: null,
  output_tokens: null,
  reasoning_tokens: null,
};

export interface TapOptions {
  bodyLogBytes: number;
  /**
   * Decoded bytes of a compressed body read for usage at most; past that decoding stops (usage is then
   * estimated). A few hundred compressed bytes can expand to gigabytes: all of it would be CPU on the event
   * loop for nothing. Identity bodies are not counted: their bytes came over the wire anyway.
   */
  maxDecodedBytes: number;
  /** An SSE event bigger than this is read from its head and tail only. */
  maxEventBytes: number;
  /** Sees every decoded piece too (batch objects and results files); `cut` when decoding stopped early. */
  observer?: { push(decoded: Buffer): void; cut(): void } | null;
}

/** `reader`: how the endpoint reports usage (its provider's), null where it bills no tokens keyrelay reads. */
export function createResponseTap(
  info: ParsedRequest,
  reader: UsageReader | null,
  res: { status: number; headers: Headers },
  opts: TapOptions,
): ResponseTap {
  const contentType = (header(res.headers, 'content-type') ?? '').toLowerCase();
  // A stream without a content-type is still a stream when the caller asked for one.
  const isSse = contentType.includes('text/event-stream') || (contentType === '' && info.stream);
  const encoding = header(res.headers, 'content-encoding');
  const decoder: BodyDecoder | null = createBodyDecoder(encoding);
  const maxDecoded = isCompressed(encoding) ? opts.maxDecodedBytes : Number.POSITIVE_INFINITY;
  let decodedBytes = 0;
  let stopped = false;
  const prefix = opts.bodyLogBytes > 0 ? new BodyPrefix(opts.bodyLogBytes) : null;
  const output = new OutputCounter();
  // Only token-billed endpoints are parsed; the rest just feed the body log.
  const stream: StreamReader | null =
    isSse && reader ? createStreamReader(reader.sse(output), opts.maxEventBytes) : null;
  // Audio and image bodies (speech, raw downloads) carry no usage: never held for a parse.
  const binary = /^(?:audio|image|video)\/|^application\/octet-stream/.test(contentType);
  const json = !isSse && reader && !binary ? new HeadTail(MAX_JSON_BYTES, JSON_EDGE_BYTES) : null;
  let unreadable = decoder === null;
  // Generated text seen by the time the body log stopped keeping bytes (to the piece that crossed its limit):
  // a stream's search text holds no more of the answer than its logged body does.
  let textAtCut: number | null = null;
  let result: Usage | null = null;

  // Nothing left to learn: no usage to read and the log's prefix full (or none kept).
  const observer = opts.observer ?? null;
  if (unreadable) observer?.cut();
  const done = () => !stream && !json && !observer && (!prefix || prefix.size > opts.bodyLogBytes);
  const stop = () => {
    stopped = true;
    decoder?.close();
  };
  /** Takes every decoded piece of what was written, one at a time, until a cap or nothing more to learn. */
  const drain = () => {
    if (!decoder || unreadable || stopped) return;
    for (let piece = decoder.read(); piece; piece = decoder.read()) {
      decodedBytes += piece.length;
      prefix?.add(piece);
      stream?.push(piece);
      if (textAtCut === null && prefix && prefix.size > opts.bodyLogBytes) textAtCut = output.length;
      json?.add(piece);
      observer?.push(piece);
      if (decodedBytes >= maxDecoded) observer?.cut();
      if (decodedBytes >= maxDecoded || done()) return stop();
    }
  };

  const fail = () => {
    unreadable = true; // corrupt encoding: keep what was read, stop reading
    observer?.cut();
    decoder?.close();
  };
  // A compressed body is decoded off the event loop: its pieces come when they are ready.
  decoder?.onReadable(() => {
    try {
      drain();
    } catch {
      fail();
    }
  });

  return {
    write(chunk) {
      if (unreadable || result || stopped || !decoder) return;
      try {
        decoder.write(chunk);
        drain();
      } catch {
        fail();
      }
    },
    async drained() {
      if (unreadable || result || stopped || !decoder) return;
      try {
        await decoder.end();
        drain();
      } catch {
        fail();
      }
    },
    // Whether the stream was cut short shows in what arrived: no final usage event, or unparsable JSON.
    finish() {
      if (result) return result;
      if (!unreadable && !stopped && decoder) {
        try {
          drain();
        } catch {
          unreadable = true;
          observer?.cut();
        }
        decoder.close();
      }
      try {
        stream?.end();
        result = computeUsage(info, reader, res.status, stream, json, output);
      } catch {
        result = { ...NO_TOKENS, source: 'none', model: null };
      }
      return result;
    },
    body() {
      if (!prefix || decoder === null) return { text: null, truncated: false, searchText: null };
      const { text, truncated } = prefix.text();
      return {
        text,
        truncated,
        searchText: stream ? streamSearchText(text, output, textAtCut, opts.bodyLogBytes) : null,
      };
    },
  };
}

/**
 * What search reads of a stream instead of its frames (RequestLogRow.response_search_text): the first event,
 * then the text the model streamed, joined. The frames split words across events ("Hel", "lo") and repeat
 * ~200 characters of JSON around each few characters of text, which the index paid for (~75 µs a streamed
 * row on the writer). Null when no text was seen (an error or a kind of stream without text):
 * search then reads the frames. Like the body it stands for, it stops where the body log stopped (`textChars`,
 * to the piece that crossed the limit; null: all of it) and within the limit.
 */
function streamSearchText(
  body: string,
  output: OutputCounter,
  textChars: number | null,
  limit: number,
): string | null {
  if (!output.seen) return null;
  const blank = body.search(/\r?\n\r?\n/);
  // The first event carries the stream's ids and model. It is within the logged body, so within its limit.
  const first = blank < 0 ? body : body.slice(0, blank);
  const text = textChars === null ? output.text() : output.text().slice(0, textChars);
  return `${first}\n${text}`.slice(0, limit);
}

/** Per reader, the top-level members a JSON body is read by: usage, model, a Responses wrapper, its own. */
const membersOf = new WeakMap<UsageReader, readonly string[]>();
const MEMBERS = ['usage', 'model', 'response'] as const;

/**
 * The final usage of a JSON body from its `usage` and `model` members alone, without building the rest
 * (choices, content: most of the body). Null when that does not settle it (no final counts, a Responses
 * wrapper, text that is not one object): the whole body is then parsed, for the wrapper or an estimate.
 */
function readMembers(reader: UsageReader, text: string): Reported | null {
  let keys = membersOf.get(reader);
  if (!keys) {
    keys = [...MEMBERS, ...(reader.bodyMembers ?? [])];
    membersOf.set(reader, keys);
  }
  const members = readTopLevelMembers(text, keys);
  if (!members || isRecord(members.response)) return null;
  const { counts, final } = reader.json(members.usage, members);
  if (!counts || !final) return null;
  const model = typeof members.model === 'string' ? members.model : null;
  return { counts, model, final, finishReasons: reader.finishReasons?.(members, text) };
}

/**
 * Below this, JSON.parse of the whole body is as fast as reading its members (measured: 0.84 vs 1.15 µs at
 * 400 bytes, even at ~1.5 KB; at 11 KB 5.0 vs 1.3 µs), and the tree it builds is small.
 */
const MEMBER_READ_MIN_CHARS = 2048;

function readJson(reader: UsageReader, body: HeadTail, output: OutputCounter): Reported {
  const { whole: text, head, tail } = body.read();
  const quick = text !== null && text.length >= MEMBER_READ_MIN_CHARS ? readMembers(reader, text) : null;
  if (quick) return quick;
  let parsed: unknown = null;
  if (text !== null) {
    try {
      parsed = JSON.parse(text) as unknown;
    } catch {
      parsed = null;
    }
  }
  let usage: unknown;
  let model: string | null = null;
  let whole: Record<string, unknown> | undefined;
  if (isRecord(parsed)) {
    const inner = isRecord(parsed.response) ? parsed.response : parsed; // Responses API background wrappers
    usage = inner.usage;
    whole = inner;
    model = typeof inner.model === 'string' ? inner.model : null;
    collectResponseText(inner, output);
  } else if (text === null) {
    usage = findUsageObject(tail);
    model = modelInHead(head);
  }
  const { counts, final } = reader.json(usage, whole);
  const finishReasons = reader.finishReasons?.(whole ?? {}, text ?? tail);
  return { counts, model, final, finishReasons };
}

function computeUsage(
  info: ParsedRequest,
  reader: UsageReader | null,
  status: number,
  stream: StreamReader | null,
  json: HeadTail | null,
  output: OutputCounter,
): Usage {
  if (!reader) return { ...NO_TOKENS, source: 'none', model: null };
  const reported: Reported = stream
    ? stream.reported()
    : json
      ? readJson(reader, json, output)
      : { counts: null, model: null, final: false };
  const { counts, model } = reported;
  const reasons = reported.finishReasons?.length ? { finish_reasons: reported.finishReasons } : {};

  if (counts) {
    if (reported.final) return { ...counts, source: 'provider', model, ...reasons };
    // Cut short (Anthropic: message_start's output count is a placeholder): what was streamed says more.
    const out = Math.max(counts.output_tokens ?? 0, output.total());
    return { ...counts, output_tokens: out, source: 'partial', model, ...reasons };
  }
  // The provider bills nothing for a refused request: no estimate for an error (or redirect) response.
  if (status >= 300 || status < 200) return { ...NO_TOKENS, source: 'none', model, ...reasons };
  if (reader.estimable === false) return { ...NO_TOKENS, source: 'none', model, ...reasons };
  const input = estimateRequestTokens(info.json);
  if (input === null && !output.seen) return { ...NO_TOKENS, source: 'none', model, ...reasons };
  return {
    ...reasons,
    input_tokens: input,
    cache_read_tokens: null,
    cache_write_tokens: null,
    output_tokens: reader.generatesOutput ? output.total() : 0,
    reasoning_tokens: null,
    source: 'estimated',
    model,
  };
}
