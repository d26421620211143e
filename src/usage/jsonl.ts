/**
 * JSON Lines read as they stream past, in constant memory: each line is parsed alone and dropped. A line
 * longer than the limit is never held whole; it reaches the caller as `undefined`, like one that is not JSON.
 */
export class JsonLines {
  private readonly parts: Buffer[] = [];
  private size = 0;
  private overlong = false;

  /** `line` gets each non-empty line's parsed value, or `undefined` for a line too long or not JSON. */
  constructor(
    private readonly maxLineBytes: number,
    private readonly line: (value: unknown) => void,
  ) {}

  push(piece: Buffer): void {
    let from = 0;
    for (let nl = piece.indexOf(0x0a, from); nl >= 0; nl = piece.indexOf(0x0a, from)) {
      this.take(piece.subarray(from, nl));
      this.emit();
      from = nl + 1;
    }
    if (from < piece.length) this.take(piece.subarray(from));
  }

  /** The last line, when the file does not end with a newline. */
  end(): void {
    if (this.size > 0 || this.overlong) this.emit();
  }

  private take(bytes: Buffer): void {
    if (this.overlong || bytes.length === 0) return;
    if (this.size + bytes.length > this.maxLineBytes) {
      this.overlong = true;
      this.parts.length = 0;
      this.size = 0;
      return;
    }
    // Copied: a piece's buffer may be reused by its producer (a decoder) once read.
    this.parts.push(Buffer.from(bytes));
    this.size += bytes.length;
  }

  private emit(): void {
    const overlong = this.overlong;
    const text = overlong ? '' : Buffer.concat(this.parts, this.size).toString('utf8').trim();
    this.parts.length = 0;
    this.size = 0;
    this.overlong = false;
    if (overlong) return this.line(undefined);
    if (text === '') return;
    let parsed: unknown;
    try {
      parsed = JSON.parse(text) as unknown;
    } catch {
      return this.line(undefined);
    }
    this.line(parsed);
  }
}
