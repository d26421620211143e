/**
 * The models a batch input file names, read as it streams past (an upload's file part, or the file read
 * back from upstream when a batch is created), line by line: each line is parsed alone and dropped.
 */
import type { BatchSupport } from '../providers/types.js';
import { isRecord, JsonLines, type BatchWork } from '../usage/index.js';

/** A line is one request's body: held up to the size keyrelay parses a JSON request body to. */
export const MAX_INPUT_LINE_BYTES = 64 * 1024 * 1024;

export class BatchInputReader {
  private readonly models = new Set<string>();
  private unreadable = 0;
  private readonly lines = new JsonLines(MAX_INPUT_LINE_BYTES, (line) => {
    const model = isRecord(line) ? (this.support.inputLineModel?.(line) ?? null) : null;
    if (model === null) this.unreadable++;
    else this.models.add(model);
  });

  constructor(private readonly support: BatchSupport) {}

  push(piece: Buffer): void {
    this.lines.push(piece);
  }

  /** What the file runs; `unreadable` counts lines whose model could not be read. */
  end(): BatchWork {
    this.lines.end();
    return { models: [...this.models], unreadable: this.unreadable };
  }
}
