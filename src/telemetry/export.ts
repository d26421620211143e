/**
 * Export off the hot path, with every loss counted. A span ends synchronously into a bounded queue; the
 * SDK's BatchSpanProcessor sends batches on its timer. A collector that is down or hangs fills the queue,
 * and what no longer fits is dropped (counted), never waited for.
 */
import { TraceFlags, type Context } from '@opentelemetry/api';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import {
  AggregationTemporality,
  type InstrumentType,
  type PushMetricExporter,
  type ResourceMetrics,
} from '@opentelemetry/sdk-metrics';
import {
  BatchSpanProcessor,
  type ReadableSpan,
  type Span,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace';

/** Spans waiting for export (the SDK's default queue): past it a hanging collector costs spans, not memory. */
export const MAX_QUEUED_SPANS = 2048;
/** Spans per export request (the SDK's default). */
const MAX_EXPORT_BATCH = 512;

export interface ExportLosses {
  spans(reason: 'queue_full' | 'export_failed', n: number): void;
  metrics(): void;
  /** The first failure after a success: one warning a streak, not one an export. */
  failing(signal: 'traces' | 'metrics', err: Error | undefined): void;
  recovered(signal: 'traces' | 'metrics'): void;
}

/**
 * A BatchSpanProcessor behind a counted bound. The SDK drops spans past its queue without saying so; this
 * bound sits below the SDK's, so every span that is not exported is one counted here.
 */
export class CountedBatchProcessor implements SpanProcessor {
  private queued = 0;
  private readonly batch: BatchSpanProcessor;

  constructor(
    exporter: SpanExporter,
    private readonly losses: ExportLosses,
    delayMs: number,
    timeoutMs: number,
    private readonly maxQueued = MAX_QUEUED_SPANS,
  ) {
    this.batch = new BatchSpanProcessor({
      exporter: new CountedSpanExporter(exporter, losses, (n) => (this.queued -= n)),
      maxQueueSize: maxQueued + MAX_EXPORT_BATCH,
      maxExportBatchSize: MAX_EXPORT_BATCH,
      scheduledDelayMillis: delayMs,
      exportTimeoutMillis: timeoutMs,
    });
  }

  onStart(span: Span, parent: Context): void {
    this.batch.onStart(span, parent);
  }

  onEnd(span: ReadableSpan): void {
    // The SDK queues sampled spans only; counting others would fill the bound with spans never sent.
    if ((span.spanContext().traceFlags & TraceFlags.SAMPLED) === 0) return;
    if (this.queued >= this.maxQueued) return this.losses.spans('queue_full', 1);
    this.queued++;
    this.batch.onEnd(span);
  }

  forceFlush(): Promise<void> {
    return this.batch.forceFlush();
  }

  shutdown(): Promise<void> {
    return this.batch.shutdown();
  }
}

class CountedSpanExporter implements SpanExporter {
  constructor(
    private readonly inner: SpanExporter,
    private readonly losses: ExportLosses,
    private readonly taken: (n: number) => void,
  ) {}

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.taken(spans.length);
    this.inner.export(spans, (result) => {
      if (result.code === ExportResultCode.SUCCESS) this.losses.recovered('traces');
      else {
        this.losses.spans('export_failed', spans.length);
        this.losses.failing('traces', result.error);
      }
      done(result);
    });
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush?.() ?? Promise.resolve();
  }
}

/** A metric exporter whose failed exports are counted (the next export sends the cumulative sums again). */
export class CountedMetricExporter implements PushMetricExporter {
  constructor(
    private readonly inner: PushMetricExporter,
    private readonly losses: ExportLosses,
  ) {}

  export(metrics: ResourceMetrics, done: (result: ExportResult) => void): void {
    this.inner.export(metrics, (result) => {
      if (result.code === ExportResultCode.SUCCESS) this.losses.recovered('metrics');
      else {
        this.losses.metrics();
        this.losses.failing('metrics', result.error);
      }
      done(result);
    });
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush();
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }

  selectAggregationTemporality(type: InstrumentType): AggregationTemporality {
    return this.inner.selectAggregationTemporality?.(type) ?? AggregationTemporality.CUMULATIVE;
  }
}
