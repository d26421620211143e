/** Bounded byte keepers for the tap: the body-log prefix, and a head+tail window for large JSON bodies. */
import { StringDecoder } from 'node:string_decoder';

/**
 * The first `limit` decoded bytes, for the log row. A body that comes in one piece is kept as that piece;
 * from the second piece on, the bytes are copied into one buffer that doubles as it fills. A stream lives
 * longer than the young generation between two collections, so what it holds gets promoted: one buffer
 * instead of a Buffer object per chunk (50 for a short answer) keeps that small.
 */
export class BodyPrefix {
  private first: Buffer | null = null;
  private buf: Buffer | null = null;
  private kept = 0;
  private total = 0;

  constructor(private readonly limit: number) {}

  add(chunk: Buffer): void {
    this.total += chunk.length;
    const room = this.limit - this.kept;
    if (room <= 0 || chunk.length === 0) return;
    const piece = chunk.length <= room ? chunk : chunk.subarray(0, room);
    if (this.kept === 0) {
      this.first = piece;
    } else {
      const need = this.kept + piece.length;
      if (!this.buf || this.buf.length < need) {
        const grown = Buffer.allocUnsafe(
          Math.min(this.limit, Math.max(need, 2 * (this.buf?.length ?? 0), 4096)),
        );
        (this.buf ?? this.first!).copy(grown, 0, 0, this.kept);
        this.buf = grown;
        this.first = null;
      }
      piece.copy(this.buf, this.kept);
    }
    this.kept += piece.length;
  }

  get size(): number {
    return this.total;
  }

  text(): { text: string; truncated: boolean } {
    // StringDecoder.write holds back a multibyte character cut by the limit instead of mangling it.
    const kept = this.buf ? this.buf.subarray(0, this.kept) : (this.first ?? Buffer.alloc(0));
    const text = new StringDecoder('utf8').write(kept);
    return { text, truncated: this.total > this.kept };
  }
}

/** The whole body up to `max` bytes; past that only its first `edge` and last `edge` bytes. */
export class HeadTail {
  private parts: Buffer[] = [];
  private size = 0;
  private overflow = false;
  private head: Buffer = Buffer.alloc(0);
  private tail: Buffer[] = [];
  private tailSize = 0;

  constructor(
    private readonly max: number,
    private readonly edge: number,
  ) {}

  add(chunk: Buffer): void {
    if (!this.overflow) {
      if (this.size + chunk.length <= this.max) {
        this.parts.push(chunk);
        this.size += chunk.length;
        return;
      }
      const all = Buffer.concat([...this.parts, chunk]);
      this.head = all.subarray(0, this.edge);
      this.parts = [];
      this.overflow = true;
      this.tail = [all.subarray(Math.max(this.edge, all.length - this.edge))];
      this.tailSize = this.tail[0]?.length ?? 0;
      return;
    }
    this.tail.push(chunk);
    this.tailSize += chunk.length;
    while (this.tail.length > 1 && this.tailSize - (this.tail[0]?.length ?? 0) >= this.edge) {
      this.tailSize -= this.tail.shift()?.length ?? 0;
    }
  }

  /** Whole text, or null with head/tail texts when it overflowed. */
  read(): { whole: string | null; head: string; tail: string } {
    if (!this.overflow) {
      // One chunk (most bodies): decoded where it lies, not copied first.
      const whole = this.parts.length === 1 ? this.parts[0]! : Buffer.concat(this.parts, this.size);
      return { whole: whole.toString('utf8'), head: '', tail: '' };
    }
    return { whole: null, head: this.head.toString('utf8'), tail: Buffer.concat(this.tail).toString('utf8') };
  }
}
