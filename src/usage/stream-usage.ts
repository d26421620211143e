/**
 * The one exception to forwarding bodies as received (docs/ARCHITECTURE.md, "Body"): a streaming call to an
 * endpoint whose row says `injectStreamUsage` (OpenAI chat completions) that did not ask for usage is sent
 * upstream asking for it, and what that added is removed from the stream again, so the caller gets the
 * bytes it would have got directly while the log gets the provider's usage.
 */
import { PassThrough, Transform } from 'node:stream';
import { createBodyDecoder } from './decoder.js';
import { findTopLevelMember, removeMember } from './json-members.js';
import { isRecord } from './normalize.js';
import { SseSplitter, type SseSegment } from './sse-splitter.js';
import type { ParsedRequest } from './types.js';

const INSERT = Buffer.from('"stream_options":{"include_usage":true},');

/**
 * The request body to send instead (asking for usage), or null to send the original. For an endpoint whose
 * row says `injectStreamUsage` only: the caller asks the provider's table.
 */
export function askForStreamUsage(info: ParsedRequest, body: Buffer): Buffer | null {
  if (!info.stream || !isRecord(info.json)) return null;
  const options = info.json.stream_options;
  if (isRecord(options) && options.include_usage === true) return null;
  if (options === undefined) {
    // Minimal edit: a new first member; every byte of the caller's body stays as it was.
    let i = 0;
    while (i < body.length && (body[i] === 0x20 || body[i] === 0x09 || body[i] === 0x0a || body[i] === 0x0d))
      i++;
    if (body[i] === 0x7b) return Buffer.concat([body.subarray(0, i + 1), INSERT, body.subarray(i + 1)]);
  }
  // stream_options present without include_usage (or null): rewriting it in place is not worth the risk.
  const rewritten = {
    ...info.json,
    stream_options: { ...(isRecord(options) ? options : {}), include_usage: true },
  };
  return Buffer.from(JSON.stringify(rewritten));
}

const USAGE_NULL_TAIL = ',"usage":null}';
const USAGE_KEY_BYTES = Buffer.from('"usage"');
const USAGE_NULL_TAIL_BYTES = Buffer.from(USAGE_NULL_TAIL);
const DATA_FIELD_BYTES = Buffer.from('data:');
/** What is cut from a `…,"usage":null}` payload: all of the tail but its closing brace. */
const USAGE_NULL_MEMBER_BYTES = USAGE_NULL_TAIL.length - 1;

/** Where each data line's payload starts and ends in the event text. */
function dataSpans(text: string): Array<[number, number]> {
  const spans: Array<[number, number]> = [];
  let pos = 0;
  while (pos < text.length) {
    let end = pos;
    while (end < text.length && text.charCodeAt(end) !== 0x0a && text.charCodeAt(end) !== 0x0d) end++;
    if (text.startsWith('data:', pos)) {
      const start = pos + 5 + (text.charCodeAt(pos + 5) === 0x20 ? 1 : 0);
      spans.push([start, Math.max(start, end)]);
    }
    pos = end + (text.charCodeAt(end) === 0x0d && text.charCodeAt(end + 1) === 0x0a ? 2 : 1);
  }
  return spans;
}

function isUsageOnlyChunk(payload: unknown): boolean {
  return (
    isRecord(payload) &&
    isRecord(payload.usage) &&
    Array.isArray(payload.choices) &&
    payload.choices.length === 0
  );
}

/** The segment as the caller would have received it without include_usage (empty when it must vanish). */
export function stripUsageFromEvent(segment: SseSegment): Buffer {
  if (!segment.isEvent) return segment.raw;
  if (segment.raw.indexOf(USAGE_KEY_BYTES) === -1) return segment.raw;
  return stripUsageNullTail(segment.raw) ?? stripUsageFromText(segment);
}

/**
 * Every chunk of an injected stream: one data line whose payload ends in `,"usage":null}`, and nothing
 * after it but the blank line. Cut from the bytes as they are (the same result as the text path below, which
 * checks the same tail), without decoding the event to a string and encoding it back. Null otherwise.
 */
function stripUsageNullTail(raw: Buffer): Buffer | null {
  if (DATA_FIELD_BYTES.compare(raw, 0, DATA_FIELD_BYTES.length) !== 0) return null;
  const lf = raw.indexOf(0x0a);
  const cr = raw.indexOf(0x0d);
  const end = lf === -1 ? (cr === -1 ? raw.length : cr) : cr === -1 || lf < cr ? lf : cr;
  for (let i = end; i < raw.length; i++) if (raw[i] !== 0x0a && raw[i] !== 0x0d) return null;
  const tail = end - USAGE_NULL_TAIL_BYTES.length;
  if (tail < DATA_FIELD_BYTES.length || USAGE_NULL_TAIL_BYTES.compare(raw, tail, end) !== 0) return null;
  return Buffer.concat([raw.subarray(0, tail), raw.subarray(tail + USAGE_NULL_MEMBER_BYTES)]);
}

/** The general case: any data lines, any member order (exported for the test that compares both paths). */
export function stripUsageFromText(segment: SseSegment): Buffer {
  // latin1 maps bytes 1:1 to chars, so cutting the string and re-encoding it keeps every other byte.
  const text = segment.raw.toString('latin1');
  if (!text.includes('"usage"')) return segment.raw;
  const spans = dataSpans(text);
  if (spans.length !== 1) {
    // A JSON payload split over several data lines: only the usage-only chunk is recognised (and dropped).
    try {
      const joined = spans.map(([s, e]) => segment.raw.subarray(s, e).toString('utf8')).join('\n');
      if (isUsageOnlyChunk(JSON.parse(joined))) return Buffer.alloc(0);
    } catch {
      // not JSON: leave as is
    }
    return segment.raw;
  }
  const [start, end] = spans[0] ?? [0, 0];
  const payload = text.slice(start, end);
  let stripped: string;
  if (payload.endsWith(USAGE_NULL_TAIL)) {
    stripped = payload.slice(0, -USAGE_NULL_TAIL.length) + '}';
  } else {
    const open = payload.search(/\S/);
    if (open < 0 || payload.charCodeAt(open) !== 0x7b) return segment.raw;
    const usage = findTopLevelMember(payload, 'usage', open);
    if (!usage) return segment.raw;
    if (payload.charCodeAt(usage.valueStart) === 0x7b) {
      const choices = findTopLevelMember(payload, 'choices', open);
      const empty = choices && /^\[\s*\]$/.test(payload.slice(choices.valueStart, choices.valueEnd));
      if (empty) return Buffer.alloc(0);
    } else if (payload.slice(usage.valueStart, usage.valueEnd) !== 'null') return segment.raw;
    stripped = removeMember(payload, usage);
  }
  return Buffer.from(text.slice(0, start) + stripped + text.slice(end), 'latin1');
}

/**
 * Goes between upstream and the caller when injectStreamUsage changed the request. Emits each event as soon
 * as its terminating blank line arrives. A content-encoded upstream body is decoded and sent on as
 * identity: the proxy must then drop `content-encoding` and `content-length` from the response headers.
 * Only for a 2xx `text/event-stream` response (an error body passes through the stripper unchanged, but
 * is held until it ends).
 *
 * Memory stays bounded whatever upstream sends: decoding pauses whenever the caller is not reading (a
 * small compressed chunk can decode to gigabytes), and an event over `maxEventBytes` is never held whole:
 * it goes on unchanged, piece by piece (a usage chunk is a few hundred bytes, so nothing of ours is in it
 * but the `"usage":null` member the injected option adds to every chunk, which then stays).
 */
export function createUsageStripper(
  contentEncoding: string | undefined,
  opts: { maxEventBytes: number },
): Transform {
  const decoder = createBodyDecoder(contentEncoding);
  if (!decoder) return new PassThrough(); // unknown coding: cannot look inside, pass it on untouched
  const splitter = new SseSplitter(opts.maxEventBytes, 'pass');
  const emit = usageEventFilter((piece) => stripper.push(piece));
  /** The caller is not reading: decoded pieces wait in the decoder (which then stops decoding). */
  let waiting = false;
  /** Moves decoded pieces on until none is ready or the caller has enough; at the end, all that is left. */
  const pump = (last = false): void => {
    if (stripper.destroyed) return;
    try {
      for (let decoded = decoder.read(); decoded; decoded = decoder.read()) {
        splitter.push(decoded, emit);
        if (!last && stripper.readableLength >= stripper.readableHighWaterMark) return void (waiting = true);
      }
    } catch (err) {
      stripper.destroy(err instanceof Error ? err : new Error(String(err)));
    }
  };
  decoder.onReadable(() => {
    if (!waiting) pump();
  });
  const stripper: Transform = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      try {
        // The next chunk is taken once this one is decoded, and decoding waits for the caller's reads.
        decoder.write(chunk, () => callback());
      } catch (err) {
        return callback(err instanceof Error ? err : new Error(String(err)));
      }
      if (!waiting) pump(); // an identity "decoder" has its piece ready at once
    },
    flush(callback) {
      decoder.end().then(
        () => {
          pump(true);
          decoder.close();
          splitter.end(emit);
          callback();
        },
        (err: unknown) => {
          decoder.close();
          callback(err instanceof Error ? err : new Error(String(err)));
        },
      );
    },
    destroy(err, callback) {
      decoder.close();
      callback(err);
    },
  });
  const transformRead = stripper._read.bind(stripper);
  stripper._read = (size: number) => {
    if (waiting) {
      waiting = false;
      pump();
    }
    transformRead(size);
  };
  return stripper;
}

/**
 * The stripper for an identity-coded stream (the usual case), without a stream of its own: undici's handler
 * (proxy/forward.ts) pushes each piece in and the events go to `send` at once, so a chunk makes no extra
 * stream hop. What comes out is never more than what went in, so there is nothing to pace.
 */
export interface BodyRewrite {
  push(chunk: Buffer): void;
  end(): void;
}

export function createIdentityUsageStripper(
  opts: { maxEventBytes: number },
  send: (piece: Buffer) => void,
): BodyRewrite {
  const splitter = new SseSplitter(opts.maxEventBytes, 'pass');
  const emit = usageEventFilter(send);
  return { push: (chunk) => splitter.push(chunk, emit), end: () => splitter.end(emit) };
}

/** Each segment as the caller would have received it, to `send`; both strippers' last step. */
function usageEventFilter(send: (piece: Buffer) => void): (segment: SseSegment) => void {
  // The LF of a CRLF whose CR ended an event comes as its own segment: it goes wherever that event went.
  let droppedLast = false;
  return (segment) => {
    if (segment.passed) {
      droppedLast = false;
      send(segment.raw);
      return;
    }
    if (!segment.isEvent) {
      if (!droppedLast) send(segment.raw);
      return;
    }
    const out = stripUsageFromEvent(segment);
    droppedLast = out.length === 0;
    if (out.length > 0) send(out);
  };
}
