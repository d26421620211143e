/**
 * OpenTelemetry export, configured by the standard OTEL_* variables only
 * (https://opentelemetry.io/docs/specs/otel/protocol/exporter/). config.ts hands this the environment;
 * export is on when an endpoint is set, and a malformed value stops the start naming the variable.
 */

export type OtlpProtocol = 'http/protobuf' | 'http/json';

export interface TelemetrySettings {
  /** Null: no traces endpoint, spans are not made. */
  tracesUrl: string | null;
  /** Null: no metrics endpoint, the GenAI metrics are not kept. */
  metricsUrl: string | null;
  protocol: OtlpProtocol;
  headers: Readonly<Record<string, string>>;
  serviceName: string;
  resourceAttributes: Readonly<Record<string, string>>;
  /** OTEL_BSP_SCHEDULE_DELAY: the span batch's longest wait before export. */
  spanDelayMs: number;
  /** OTEL_METRIC_EXPORT_INTERVAL. */
  metricIntervalMs: number;
  /** OTEL_EXPORTER_OTLP_TIMEOUT: one export's deadline. */
  exportTimeoutMs: number;
  /** Never read from the environment (export.ts MAX_QUEUED_SPANS applies); a test may set it. */
  maxQueuedSpans?: number;
}

export class TelemetrySettingsError extends Error {
  override name = 'TelemetrySettingsError';
}

// The spec's defaults (sdk-environment-variables.md).
const DEFAULT_SPAN_DELAY_MS = 5_000;
const DEFAULT_METRIC_INTERVAL_MS = 60_000;
const DEFAULT_EXPORT_TIMEOUT_MS = 10_000;

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
// A field value (RFC 9110 §5.5) without obs-text: no CR, LF or NUL can split the export request.
const HEADER_VALUE = /^[\t\x20-\x7e]*$/;

/** The settings, or null when export is off (no endpoint set, or OTEL_SDK_DISABLED=true). */
export function readTelemetrySettings(env: Record<string, string | undefined>): TelemetrySettings | null {
  const get = (name: string): string | undefined => {
    const v = env[name]?.trim();
    return v === undefined || v === '' ? undefined : v;
  };
  if (get('OTEL_SDK_DISABLED')?.toLowerCase() === 'true') return null;
  const base = get('OTEL_EXPORTER_OTLP_ENDPOINT');
  const tracesUrl = signalUrl(base, get('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'), 'TRACES', 'v1/traces');
  const metricsUrl = signalUrl(base, get('OTEL_EXPORTER_OTLP_METRICS_ENDPOINT'), 'METRICS', 'v1/metrics');
  if (tracesUrl === null && metricsUrl === null) return null;
  const protocol = get('OTEL_EXPORTER_OTLP_PROTOCOL') ?? 'http/protobuf';
  if (protocol !== 'http/protobuf' && protocol !== 'http/json')
    throw new TelemetrySettingsError(
      `OTEL_EXPORTER_OTLP_PROTOCOL: "${protocol}" is not supported; use http/protobuf or http/json`,
    );
  const headers = keyValueList('OTEL_EXPORTER_OTLP_HEADERS', get('OTEL_EXPORTER_OTLP_HEADERS'));
  for (const [name, value] of Object.entries(headers)) {
    if (!HEADER_NAME.test(name))
      throw new TelemetrySettingsError(`OTEL_EXPORTER_OTLP_HEADERS: "${name}" is not a valid header name`);
    if (!HEADER_VALUE.test(value))
      throw new TelemetrySettingsError(
        `OTEL_EXPORTER_OTLP_HEADERS: the value of "${name}" has characters a header cannot carry`,
      );
  }
  const resourceAttributes = keyValueList('OTEL_RESOURCE_ATTRIBUTES', get('OTEL_RESOURCE_ATTRIBUTES'));
  return {
    tracesUrl,
    metricsUrl,
    protocol,
    headers: Object.freeze(headers),
    serviceName: get('OTEL_SERVICE_NAME') ?? resourceAttributes['service.name'] ?? 'keyrelay',
    resourceAttributes: Object.freeze(resourceAttributes),
    spanDelayMs: millis('OTEL_BSP_SCHEDULE_DELAY', get('OTEL_BSP_SCHEDULE_DELAY'), DEFAULT_SPAN_DELAY_MS),
    metricIntervalMs: millis(
      'OTEL_METRIC_EXPORT_INTERVAL',
      get('OTEL_METRIC_EXPORT_INTERVAL'),
      DEFAULT_METRIC_INTERVAL_MS,
    ),
    exportTimeoutMs: millis(
      'OTEL_EXPORTER_OTLP_TIMEOUT',
      get('OTEL_EXPORTER_OTLP_TIMEOUT'),
      DEFAULT_EXPORT_TIMEOUT_MS,
    ),
  };
}

/** A signal's URL: its own variable as given, else the base endpoint with the signal's path appended. */
function signalUrl(
  base: string | undefined,
  own: string | undefined,
  signal: string,
  path: string,
): string | null {
  if (own !== undefined) return httpUrl(`OTEL_EXPORTER_OTLP_${signal}_ENDPOINT`, own);
  if (base === undefined) return null;
  return httpUrl('OTEL_EXPORTER_OTLP_ENDPOINT', base).replace(/\/*$/, `/${path}`);
}

function httpUrl(name: string, value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    // Not echoed: an endpoint may carry credentials.
    throw new TelemetrySettingsError(`${name}: is not a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new TelemetrySettingsError(`${name}: must be an http(s) URL (OTLP/HTTP)`);
  return value;
}

/**
 * The W3C Baggage-like list the spec gives OTEL_EXPORTER_OTLP_HEADERS and OTEL_RESOURCE_ATTRIBUTES:
 * `name=value` pairs separated by commas, values percent-encoded. Any malformed entry is an error: a
 * silently skipped authorization header would show up only as an empty dashboard.
 */
function keyValueList(name: string, value: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (value === undefined) return out;
  value.split(',').forEach((entry, i) => {
    const eq = entry.indexOf('=');
    const key = eq === -1 ? '' : entry.slice(0, eq).trim();
    if (key === '')
      // The entry itself is not echoed: it may be a credential.
      throw new TelemetrySettingsError(`${name}: entry ${i + 1} is not name=value (comma-separated)`);
    try {
      out[key] = decodeURIComponent(entry.slice(eq + 1).trim());
    } catch {
      throw new TelemetrySettingsError(`${name}: the value of "${key}" has a malformed percent-encoding`);
    }
  });
  return out;
}

function millis(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1)
    throw new TelemetrySettingsError(`${name}: "${value}" is not a whole number of milliseconds`);
  return n;
}
