/**
 * OpenTelemetry traces and metrics for proxied calls (docs/observability.md), off unless an OTLP endpoint
 * is set. `observe` is the one entry: called once a call has ended (its row built), it makes the call's span
 * and records its metrics; both are exported in batches on the SDK's timers, never on the request's time.
 * Nothing is registered globally: each server has its own providers, so several can share a process.
 */
import type { IncomingHttpHeaders } from 'node:http';
import {
  defaultTextMapGetter,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  type Counter,
  type Histogram,
  type Tracer,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPMetricExporter as JsonMetricExporter } from '@opentelemetry/exporter-metrics-otlp-http';
import { OTLPMetricExporter as ProtoMetricExporter } from '@opentelemetry/exporter-metrics-otlp-proto';
import { OTLPTraceExporter as JsonTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtoTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { TracerProvider } from '@opentelemetry/sdk-trace';
import type { Config } from '../config.js';
import type { Metrics } from '../metrics.js';
import {
  callFacts,
  MAX_ATTRIBUTE_CHARS,
  metricAttributes,
  spanAttributes,
  type CallFacts,
  type CallRecord,
  type Upstream,
} from './call.js';
import { CountedBatchProcessor, CountedMetricExporter, type ExportLosses } from './export.js';
import type { TelemetrySettings } from './settings.js';

export { MAX_ATTRIBUTE_CHARS, type CallRecord } from './call.js';

export interface Telemetry {
  /**
   * One ended call: its span (a child of the caller's `traceparent`, when it sent one) and its metrics.
   * `requestModel`: the model the request asked for (the row's model may be the response's);
   * `finishReasons`: why the response ended, as its provider said (`gen_ai.response.finish_reasons`).
   */
  observe(
    call: CallRecord,
    headers: IncomingHttpHeaders,
    requestModel: string | null,
    finishReasons?: readonly string[],
  ): void;
  /** Sends what is queued, for at most `timeoutMs`; then stops. */
  shutdown(timeoutMs: number): Promise<void>;
}

// The semantic conventions' advised buckets (gen-ai-metrics.md).
const TOKEN_BUCKETS = [
  1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
];
const DURATION_BUCKETS = [
  0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];
const SCOPE = 'keyrelay';

type Log = { warn(obj: object, msg: string): void; info(obj: object, msg: string): void };

/** Null when export is off: callers then skip `observe` entirely. */
export function createTelemetry(
  config: Readonly<Pick<Config, 'telemetry' | 'upstreams'>>,
  metrics: Metrics,
  log: Log,
): Telemetry | null {
  const settings = config.telemetry;
  if (!settings) return null;
  const losses = countLosses(metrics, log);
  const resource = resourceFromAttributes({
    ...settings.resourceAttributes,
    'service.name': settings.serviceName,
  });
  const exporterOptions = (url: string) => ({
    url,
    headers: { ...settings.headers },
    timeoutMillis: settings.exportTimeoutMs,
  });
  const tracer = settings.tracesUrl === null ? null : startTraces(settings, settings.tracesUrl);
  const meters = settings.metricsUrl === null ? null : startMetrics(settings, settings.metricsUrl);
  const upstreams = upstreamAddresses(config.upstreams);
  const propagator = new W3CTraceContextPropagator();
  log.info(
    { traces: shown(settings.tracesUrl), metrics: shown(settings.metricsUrl), protocol: settings.protocol },
    'OpenTelemetry export on',
  );

  function startTraces(s: TelemetrySettings, url: string) {
    const options = exporterOptions(url);
    const exporter =
      s.protocol === 'http/json' ? new JsonTraceExporter(options) : new ProtoTraceExporter(options);
    const provider = new TracerProvider({
      resource,
      spanLimits: { attributeValueLengthLimit: MAX_ATTRIBUTE_CHARS },
      spanProcessors: [
        new CountedBatchProcessor(exporter, losses, s.spanDelayMs, s.exportTimeoutMs, s.maxQueuedSpans),
      ],
    });
    return { provider, tracer: provider.getTracer(SCOPE) };
  }

  function startMetrics(s: TelemetrySettings, url: string) {
    const options = exporterOptions(url);
    const exporter =
      s.protocol === 'http/json' ? new JsonMetricExporter(options) : new ProtoMetricExporter(options);
    const provider = new MeterProvider({
      resource,
      readers: [
        new PeriodicExportingMetricReader({
          exporter: new CountedMetricExporter(exporter, losses),
          exportIntervalMillis: s.metricIntervalMs,
          exportTimeoutMillis: Math.min(s.exportTimeoutMs, s.metricIntervalMs),
        }),
      ],
    });
    const meter = provider.getMeter(SCOPE);
    return {
      provider,
      tokens: meter.createHistogram('gen_ai.client.token.usage', {
        unit: '{token}',
        description: 'Number of input and output tokens used.',
        advice: { explicitBucketBoundaries: TOKEN_BUCKETS },
      }),
      duration: meter.createHistogram('gen_ai.client.operation.duration', {
        unit: 's',
        description: 'GenAI operation duration.',
        advice: { explicitBucketBoundaries: DURATION_BUCKETS },
      }),
      cost: meter.createCounter('keyrelay.client.cost', {
        unit: 'USD',
        description: 'Cost of the calls keyrelay priced, in US dollars.',
      }),
    };
  }

  return {
    observe(call, headers, requestModel, finishReasons) {
      // Called where the call's row is recorded: a failure here must cost the span, not the call's books.
      try {
        const upstream = (call.provider && upstreams[call.provider]) || null;
        const facts = callFacts(call, requestModel, upstream, finishReasons ?? null);
        if (tracer) startAndEndSpan(tracer.tracer, propagator, call, headers, facts);
        if (meters && call.provider) recordMetrics(meters, call, facts);
      } catch (err) {
        metrics.otelSpansDropped.inc({ reason: 'failed' });
        log.warn({ err, reqId: call.id }, 'OpenTelemetry could not record a call');
      }
    },
    async shutdown(timeoutMs) {
      const done = Promise.allSettled([tracer?.provider.shutdown(), meters?.provider.shutdown()]);
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)));
      await Promise.race([done, late]);
      clearTimeout(timer);
    },
  };
}

function startAndEndSpan(
  tracer: Tracer,
  propagator: W3CTraceContextPropagator,
  call: CallRecord,
  headers: IncomingHttpHeaders,
  f: CallFacts,
): void {
  const parent = headers.traceparent
    ? propagator.extract(ROOT_CONTEXT, headers, defaultTextMapGetter)
    : ROOT_CONTEXT;
  const startedAt = Date.parse(call.created_at);
  const span = tracer.startSpan(
    f.requestModel ? `${f.operation} ${f.requestModel}` : f.operation,
    { kind: SpanKind.CLIENT, startTime: startedAt, attributes: spanAttributes(call, f) },
    parent,
  );
  if (f.errorType) span.setStatus({ code: SpanStatusCode.ERROR, message: f.errorType });
  span.end(startedAt + call.latency_ms);
}

function recordMetrics(
  m: { tokens: Histogram; duration: Histogram; cost: Counter },
  call: CallRecord,
  f: CallFacts,
): void {
  const attributes = metricAttributes(f);
  m.duration.record(
    call.latency_ms / 1000,
    f.errorType ? { ...attributes, 'error.type': f.errorType } : attributes,
  );
  if (call.input_tokens !== null && call.input_tokens >= 0)
    m.tokens.record(call.input_tokens, { ...attributes, 'gen_ai.token.type': 'input' });
  if (call.output_tokens !== null && call.output_tokens >= 0)
    m.tokens.record(call.output_tokens, { ...attributes, 'gen_ai.token.type': 'output' });
  if (call.cost_usd !== null && call.cost_usd > 0 && Number.isFinite(call.cost_usd))
    m.cost.add(call.cost_usd, { ...attributes, 'keyrelay.key.id': call.key_id ?? '' });
}

/** An endpoint for the operational log, without any credentials in it. */
function shown(url: string | null): string | null {
  if (url === null) return null;
  const u = new URL(url);
  u.username = '';
  u.password = '';
  u.search = '';
  return u.toString();
}

function upstreamAddresses(upstreams: Readonly<Record<string, string>>): Record<string, Upstream> {
  const out: Record<string, Upstream> = {};
  for (const [provider, origin] of Object.entries(upstreams)) {
    const url = new URL(origin);
    out[provider] = {
      address: url.hostname.replace(/^\[|\]$/g, ''),
      port: url.port ? Number(url.port) : url.protocol === 'https:' ? 443 : 80,
    };
  }
  return out;
}

function countLosses(metrics: Metrics, log: Log): ExportLosses {
  const failing = { traces: false, metrics: false };
  return {
    spans: (reason, n) => metrics.otelSpansDropped.inc({ reason }, n),
    metrics: () => metrics.otelMetricExportsFailed.inc(),
    failing(signal, err) {
      if (failing[signal]) return;
      failing[signal] = true;
      log.warn({ err, signal }, 'OpenTelemetry export failing; calls are unaffected, losses are counted');
    },
    recovered(signal) {
      if (!failing[signal]) return;
      failing[signal] = false;
      log.info({ signal }, 'OpenTelemetry export recovered');
    },
  };
}
