/**
 * Usage and generated text from an SSE stream, one complete event at a time. The splitting is here; what
 * an event means is the provider's (`UsageReader.sse` in src/providers/).
 */
import type { OutputCounter } from './estimate.js';
import { stringEnd } from './json-members.js';
import { isRecord } from './normalize.js';
import { parseSseEvent, SseSplitter, type SseSegment } from './sse-splitter.js';
import type { Reported, SseEventReader } from './types.js';

/** Adds every string value of the matched fields to the counter (JSON strings escape `"`, so a match is a key). */
export function addStringFields(data: string, fields: RegExp, output: OutputCounter): void {
  fields.lastIndex = 0;
  let m: RegExpExecArray | null;
  while ((m = fields.exec(data))) {
    const open = m.index + m[0].length - 1;
    const end = stringEnd(data, open);
    if (end < 0) return;
    const literal = data.slice(open, end);
    if (!literal.includes('\\')) output.add(literal.slice(1, -1));
    else {
      try {
        output.add(JSON.parse(literal) as string);
      } catch {
        // malformed escape: skip this piece
      }
    }
    fields.lastIndex = end;
  }
}

export interface StreamReader {
  push(decoded: Buffer): void;
  end(): void;
  /** Usage the provider reported; `final` once its end-of-stream figures arrived. */
  reported(): Reported;
}

/**
 * The hot path: most events are text deltas, which the provider's reader skims without a parse; only
 * events that can carry usage or the model are JSON-parsed. An event bigger than maxEventBytes (a huge
 * `response.completed`) is read from its head and tail only.
 */
export function createStreamReader(reader: SseEventReader, maxEventBytes: number): StreamReader {
  const splitter = new SseSplitter(maxEventBytes);

  const onSegment = (segment: SseSegment) => {
    if (!segment.isEvent) return;
    const event = parseSseEvent(segment.raw);
    if (!event.hasData || event.data === '[DONE]') return;
    if (segment.clipped) return reader.onClipped(event.data);
    if (reader.skim(event.event, event.data)) return;
    let data: unknown;
    try {
      data = JSON.parse(event.data) as unknown;
    } catch {
      return; // a provider's odd event is not our failure
    }
    if (isRecord(data)) reader.onEvent(data);
  };

  return {
    push(decoded) {
      splitter.push(decoded, onSegment);
    },
    end() {
      splitter.end(onSegment);
    },
    reported: () => reader.reported(),
  };
}
