/**
 * Splits an SSE byte stream into events at their blank-line terminators (HTML Living Standard, "server-sent
 * events": lines end in CRLF, LF or CR). Works on bytes, never on decoded text, so a chunk boundary inside a
 * multibyte character or between CR and LF is harmless, and raw event bytes can be passed on unchanged.
 */

const CR = 0x0d;
const LF = 0x0a;

export interface SseSegment {
  /** The bytes of this segment, exactly as received. */
  raw: Buffer;
  /** false for the lone LF of a CRLF whose CR ended the previous event (belongs to no event). */
  isEvent: boolean;
  /** true when the event outgrew maxEventBytes: `raw` then holds only its head and tail. */
  clipped: boolean;
  /**
   * In 'pass' mode, a piece of an event that outgrew maxEventBytes: its bytes in order, as they come, never
   * held whole. The pieces of one event together are exactly its bytes; none of them is parsable alone.
   */
  passed?: boolean;
}

/** What becomes of an event over maxEventBytes: 'clip' keeps its head and tail, 'pass' emits it in pieces. */
export type OversizeMode = 'clip' | 'pass';

export class SseSplitter {
  private parts: Buffer[] = [];
  private size = 0;
  private lineLen = 0;
  private lastWasCR = false;
  private clipped = false;
  private tail: Buffer[] = [];
  private tailSize = 0;
  private passing = false;
  private onSegment: (segment: SseSegment) => void = () => {};

  /**
   * maxEventBytes bounds memory: past it an event keeps its first and last maxEventBytes/2 bytes ('clip'),
   * or is emitted piece by piece as it arrives ('pass').
   */
  constructor(
    private readonly maxEventBytes = Number.POSITIVE_INFINITY,
    private readonly oversize: OversizeMode = 'clip',
  ) {}

  push(chunk: Buffer, onSegment: (segment: SseSegment) => void): void {
    this.onSegment = onSegment;
    let start = 0; // where the current event's bytes begin in this chunk
    let i = 0;
    // indexOf (memchr) finds line breaks; bytes between them only need counting.
    let nextLF = chunk.indexOf(LF);
    let nextCR = chunk.indexOf(CR);
    for (;;) {
      if (nextLF !== -1 && nextLF < i) nextLF = chunk.indexOf(LF, i);
      if (nextCR !== -1 && nextCR < i) nextCR = chunk.indexOf(CR, i);
      const j = nextLF === -1 ? nextCR : nextCR === -1 ? nextLF : Math.min(nextLF, nextCR);
      const contentEnd = j === -1 ? chunk.length : j;
      if (contentEnd > i) {
        this.lastWasCR = false;
        this.lineLen += contentEnd - i;
      }
      if (j === -1) break;
      i = j + 1;
      if (chunk[j] === LF && this.lastWasCR) {
        this.lastWasCR = false;
        if (this.size === 0 && j === start && !this.passing) {
          // The LF of a CRLF whose CR already ended the previous event.
          onSegment({ raw: chunk.subarray(j, j + 1), isEvent: false, clipped: false });
          start = j + 1;
        }
        continue;
      }
      this.lastWasCR = chunk[j] === CR;
      if (this.lineLen === 0) {
        this.emit(chunk.subarray(start, j + 1), onSegment);
        start = j + 1;
      }
      this.lineLen = 0;
    }
    if (start < chunk.length) this.append(chunk.subarray(start));
  }

  /** Bytes of an unterminated last event, if any (a stream cut short, or no final blank line). */
  end(onSegment: (segment: SseSegment) => void): void {
    this.onSegment = onSegment;
    if (this.size > 0 || this.tailSize > 0) this.emit(Buffer.alloc(0), onSegment);
    this.passing = false;
  }

  private append(piece: Buffer): void {
    if (this.passing) return void this.pass(piece);
    if (!this.clipped && this.size + piece.length <= this.maxEventBytes) {
      this.parts.push(piece);
      this.size += piece.length;
      return;
    }
    if (this.oversize === 'pass') {
      this.passing = true;
      const held = Buffer.concat([...this.parts, piece]);
      this.parts = [];
      this.size = 0;
      return void this.pass(held);
    }
    if (!this.clipped) {
      // Keep the head (event name, start of data) and from now on a rolling tail (where usage sits).
      const head = Buffer.concat(this.parts, this.size).subarray(0, Math.floor(this.maxEventBytes / 2));
      const rest = Buffer.concat(this.parts, this.size).subarray(head.length);
      this.parts = [head];
      this.size = head.length;
      this.clipped = true;
      this.pushTail(rest);
    }
    this.pushTail(piece);
  }

  private pushTail(piece: Buffer): void {
    const keep = Math.ceil(this.maxEventBytes / 2);
    this.tail.push(piece);
    this.tailSize += piece.length;
    while (this.tail.length > 1 && this.tailSize - (this.tail[0]?.length ?? 0) >= keep) {
      this.tailSize -= this.tail.shift()?.length ?? 0;
    }
  }

  private pass(piece: Buffer): void {
    if (piece.length > 0) this.onSegment({ raw: piece, isEvent: true, clipped: false, passed: true });
  }

  private emit(last: Buffer, onSegment: (segment: SseSegment) => void): void {
    let raw: Buffer;
    if (this.passing || this.size > 0 || this.tailSize > 0) {
      this.append(last); // passes it on when the event is (or has just become) too big to hold
      if (this.passing) {
        this.passing = false;
        return;
      }
      raw = Buffer.concat(this.clipped ? [...this.parts, ...this.tail] : this.parts);
    } else if (last.length > this.maxEventBytes && this.oversize === 'pass') {
      // Arrived whole in one chunk: treated as if it had come in pieces, so chunking never changes the output.
      return this.pass(last);
    } else raw = last;
    const clipped = this.clipped;
    this.parts = [];
    this.size = 0;
    this.tail = [];
    this.tailSize = 0;
    this.clipped = false;
    onSegment({ raw, isEvent: true, clipped });
  }
}

export interface SseEvent {
  event: string; // "message" when no event field
  data: string; // data lines joined with "\n"; "" when none
  hasData: boolean;
}

/** Where the line starting at `pos` ends: its first CR or LF, or the end of the text. */
function lineEnd(text: string, pos: number): number {
  const lf = text.indexOf('\n', pos);
  const cr = text.indexOf('\r', pos);
  if (lf === -1) return cr === -1 ? text.length : cr;
  return cr === -1 || lf < cr ? lf : cr;
}

/**
 * Field parsing of one complete event (raw bytes from SseSplitter). Runs for every event of every stream:
 * it walks the lines in place instead of splitting them into an array (a stream's garbage sets how often
 * the young generation is collected, and so how many 64-stream rounds meet a pause).
 */
export function parseSseEvent(raw: Buffer): SseEvent {
  const text = raw.toString('utf8');
  let event = 'message';
  let data: string | null = null;
  for (let pos = 0; pos < text.length;) {
    const end = lineEnd(text, pos);
    const colon = text.indexOf(':', pos);
    const fieldEnd = colon === -1 || colon > end ? end : colon;
    const isData = fieldEnd - pos === 4 && text.startsWith('data', pos);
    if (isData || (fieldEnd - pos === 5 && text.startsWith('event', pos))) {
      // A field with no colon has an empty value; one space after the colon is not part of it.
      let from = fieldEnd === end ? end : fieldEnd + 1;
      if (from < end && text.charCodeAt(from) === 0x20) from++;
      const value = text.slice(from, end);
      if (!isData) event = value;
      else data = data === null ? value : `${data}\n${value}`;
    }
    pos = end + (text.charCodeAt(end) === 0x0d && text.charCodeAt(end + 1) === 0x0a ? 2 : 1);
  }
  return { event, data: data ?? '', hasData: data !== null };
}
