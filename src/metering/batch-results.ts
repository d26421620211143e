/**
 * Prices a batch's results file as it streams past, line by line, in constant memory: each line is parsed
 * alone and dropped; a line longer than the limit is skipped (counted as broken), never held whole.
 */
import { providerModule, type BatchSupport, type Provider } from '../providers/index.js';
import { isRecord, JsonLines, PARTIAL, priceBatchUsage, type Usage } from '../usage/index.js';

const isPartial = (source: string | null) => source?.startsWith(`${PARTIAL}: `) === true;

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
  /**
   * How the priced lines were priced (the first line's source; lines of one batch share a model), or the
   * first partial line's, which names a fee left out of the total.
   */
  price_source: string | null;
  model: string | null;
}

export class BatchResultsReader {
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
  private readonly lines: JsonLines;

  constructor(
    private readonly provider: Provider,
    private readonly support: BatchSupport,
    maxLineBytes: number,
  ) {
    this.lines = new JsonLines(maxLineBytes, (line) => this.line(line));
  }

  push(piece: Buffer): void {
    this.lines.push(piece);
  }

  end(): void {
    this.lines.end();
  }

  private line(parsed: unknown): void {
    const line = isRecord(parsed) ? this.support.readLine(parsed) : null;
    if (!line) return void this.totals.broken++;
    this.totals.results++;
    if (!line.succeeded) return;
    this.totals.succeeded++;
    const counts = line.counts;
    const usage: Usage | null = counts ? { ...counts, source: 'provider', model: line.model } : null;
    const priced = usage
      ? priceBatchUsage(
          providerModule(this.provider).priceProviderId,
          line.model,
          usage,
          this.support.discount,
          providerModule(this.provider).freeToolFees,
        )
      : null;
    if (!priced || priced.cost_usd === null) return void this.totals.unpriced++;
    this.totals.cost_usd += priced.cost_usd;
    // A line whose cost leaves out a fee makes the batch's cost partial: its source is the one to keep.
    if (
      this.totals.price_source === null ||
      (isPartial(priced.price_source) && !isPartial(this.totals.price_source))
    )
      this.totals.price_source = priced.price_source;
    this.totals.model ??= line.model;
    this.totals.input_tokens += counts!.input_tokens ?? 0;
    this.totals.output_tokens += counts!.output_tokens ?? 0;
    this.totals.cache_read_tokens += counts!.cache_read_tokens ?? 0;
  }
}
