/**
 * Prices a batch's results file as it streams past, line by line, in constant memory: each line is parsed
 * alone and dropped; a line longer than the limit is skipped (counted as broken), never held whole.
 */
import type { Provider } from '../types.js';
import type { BatchSupport } from '../providers/types.js';
import { computeBatchCost } from './cost.js';
import { isRecord } from './normalize.js';
import type { Usage } from './types.js';

export interface BatchTotals {
  /** Lines that are result lines (succeeded or not). */
  results: number;
  succeeded: number;
  /** Succeeded lines keyrelay could not price (model unknown to the library, no usage). */
  unpriced: number;
  /** Lines that are not JSON or not result lines, or longer than the line limit. */
  broken: number;
  cost_usd: number;
  input_tokens: number;
  output_tokens: number;
  cache_read_tokens: number;
  /** How the priced lines were priced (the first line's source; lines of one batch share a model). */
  price_source: string | null;
  model: string | null;
}

export class BatchResultsReader {
  private readonly parts: Buffer[] = [];
  private size = 0;
  private overlong = false;
  readonly totals: BatchTotals = {
    results: 0,
    succeeded: 0,
    unpriced: 0,
    broken: 0,
    cost_usd: 0,
    input_tokens: 0,
    output_tokens: 0,
    cache_read_tokens: 0,
    price_source: null,
    model: null,
  };

  constructor(
    private readonly provider: Provider,
    private readonly support: BatchSupport,
    private readonly maxLineBytes: number,
  ) {}

  push(piece: Buffer): void {
    let from = 0;
    for (let nl = piece.indexOf(0x0a, from); nl >= 0; nl = piece.indexOf(0x0a, from)) {
      this.take(piece.subarray(from, nl));
      this.line();
      from = nl + 1;
    }
    if (from < piece.length) this.take(piece.subarray(from));
  }

  end(): void {
    if (this.size > 0 || this.overlong) this.line();
  }

  private take(bytes: Buffer): void {
    if (this.overlong || bytes.length === 0) return;
    if (this.size + bytes.length > this.maxLineBytes) {
      this.overlong = true;
      this.parts.length = 0;
      this.size = 0;
      return;
    }
    // Copied: the piece's buffer is reused by the decoder once read.
    this.parts.push(Buffer.from(bytes));
    this.size += bytes.length;
  }

  private line(): void {
    const overlong = this.overlong;
    const text = overlong ? '' : Buffer.concat(this.parts, this.size).toString('utf8').trim();
    this.parts.length = 0;
    this.size = 0;
    this.overlong = false;
    if (overlong) return void this.totals.broken++;
    if (text === '') return;
    let parsed: unknown;
    try {
      parsed = JSON.parse(text) as unknown;
    } catch {
      return void this.totals.broken++;
    }
    const line = isRecord(parsed) ? this.support.readLine(parsed) : null;
    if (!line) return void this.totals.broken++;
    this.totals.results++;
    if (!line.succeeded) return;
    this.totals.succeeded++;
    const counts = line.counts;
    const usage: Usage | null = counts ? { ...counts, source: 'provider', model: line.model } : null;
    const priced = usage ? computeBatchCost(this.provider, line.model, usage, this.support.discount) : null;
    if (!priced || priced.cost_usd === null) return void this.totals.unpriced++;
    this.totals.cost_usd += priced.cost_usd;
    this.totals.price_source ??= priced.price_source;
    this.totals.model ??= line.model;
    this.totals.input_tokens += counts!.input_tokens ?? 0;
    this.totals.output_tokens += counts!.output_tokens ?? 0;
    this.totals.cache_read_tokens += counts!.cache_read_tokens ?? 0;
  }
}
