/**
 * An OTLP/HTTP receiver (https://opentelemetry.io/docs/specs/otlp/#otlphttp) on a real socket, as a
 * collector would be: it decodes `application/x-protobuf` with protobufjs from the official .proto files
 * (test/fixtures/otlp-proto, from open-telemetry/opentelemetry-proto) and `application/json` as OTLP/JSON,
 * into one plain shape. `mode` makes it fail (500) or hang (never answers).
 */
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';

const PROTO_DIR = fileURLToPath(new URL('../fixtures/otlp-proto/', import.meta.url));

function loadRoot(): protobuf.Root {
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => PROTO_DIR + target;
  root.loadSync([
    'opentelemetry/proto/collector/trace/v1/trace_service.proto',
    'opentelemetry/proto/collector/metrics/v1/metrics_service.proto',
  ]);
  return root;
}
const root = loadRoot();
const TRACE_REQUEST = root.lookupType('opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest');
const METRICS_REQUEST = root.lookupType(
  'opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceRequest',
);

export type AttrValue = string | number | boolean | AttrValue[];

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  startNs: bigint;
  endNs: bigint;
  status: { code: number; message: string };
  attributes: Record<string, AttrValue>;
  resource: Record<string, AttrValue>;
  scope: string;
}

export interface ReceivedPoint {
  metric: string;
  unit: string;
  kind: 'sum' | 'histogram' | 'gauge' | 'other';
  attributes: Record<string, AttrValue>;
  /** A sum's value, or a histogram's sum. */
  value: number;
  count: number;
}

export interface OtlpReceiver {
  url: string;
  spans: ReceivedSpan[];
  points: ReceivedPoint[];
  /** Every export request's headers and content type, in order. */
  requests: { path: string; contentType: string; headers: IncomingHttpHeaders }[];
  mode: 'ok' | 'fail' | 'hang';
  /** Polls until `pred` holds over what arrived; rejects after `timeoutMs`. */
  waitFor<T>(pred: () => T | undefined | false, timeoutMs?: number): Promise<T>;
  close(): Promise<void>;
}

// OTLP's plain-object shapes, as OTLP/JSON and protobufjs's toObject both give them.
interface AnyValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: number | string;
  doubleValue?: number;
  arrayValue?: { values?: AnyValue[] };
}
interface KeyValue {
  key: string;
  value?: AnyValue;
}
interface SpanShape {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind?: number;
  startTimeUnixNano: string | number;
  endTimeUnixNano: string | number;
  attributes?: KeyValue[];
  status?: { code?: number; message?: string };
}
interface TraceShape {
  resourceSpans?: {
    resource?: { attributes?: KeyValue[] };
    scopeSpans?: { scope?: { name?: string }; spans?: SpanShape[] }[];
  }[];
}
interface PointShape {
  attributes?: KeyValue[];
  asDouble?: number;
  asInt?: number | string;
  sum?: number;
  count?: number | string;
}
interface MetricShape {
  name: string;
  unit?: string;
  sum?: { dataPoints?: PointShape[] };
  histogram?: { dataPoints?: PointShape[] };
  gauge?: { dataPoints?: PointShape[] };
}
interface MetricsShape {
  resourceMetrics?: { scopeMetrics?: { metrics?: MetricShape[] }[] }[];
}

function valueOf(value: AnyValue): AttrValue | undefined {
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.boolValue !== undefined) return value.boolValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  if (value.arrayValue !== undefined)
    return (value.arrayValue.values ?? []).flatMap((v) => {
      const item = valueOf(v);
      return item === undefined ? [] : [item];
    });
  return undefined;
}

function attrs(list: KeyValue[] | undefined): Record<string, AttrValue> {
  const out: Record<string, AttrValue> = {};
  for (const { key, value } of list ?? []) {
    const v = value ? valueOf(value) : undefined;
    if (v !== undefined) out[key] = v;
  }
  return out;
}

// OTLP/JSON gives ids as hex strings; protobufjs with `bytes: String` gives base64.
function hexId(id: string | undefined, json: boolean): string {
  if (!id) return '';
  return json ? id.toLowerCase() : Buffer.from(id, 'base64').toString('hex');
}

function decode(type: protobuf.Type, body: Buffer, json: boolean): unknown {
  if (json) return JSON.parse(body.toString('utf8'));
  return type.toObject(type.decode(body), { longs: String, bytes: String, enums: Number, defaults: false });
}

function toSpans(msg: TraceShape, json: boolean): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  for (const rs of msg.resourceSpans ?? []) {
    const resource = attrs(rs.resource?.attributes);
    for (const ss of rs.scopeSpans ?? [])
      for (const s of ss.spans ?? [])
        out.push({
          traceId: hexId(s.traceId, json),
          spanId: hexId(s.spanId, json),
          parentSpanId: hexId(s.parentSpanId, json),
          name: s.name,
          kind: s.kind ?? 0,
          startNs: BigInt(s.startTimeUnixNano),
          endNs: BigInt(s.endTimeUnixNano),
          status: { code: s.status?.code ?? 0, message: s.status?.message ?? '' },
          attributes: attrs(s.attributes),
          resource,
          scope: ss.scope?.name ?? '',
        });
  }
  return out;
}

function toPoints(msg: MetricsShape): ReceivedPoint[] {
  const out: ReceivedPoint[] = [];
  for (const rm of msg.resourceMetrics ?? [])
    for (const sm of rm.scopeMetrics ?? [])
      for (const m of sm.metrics ?? []) {
        const kind = m.sum ? 'sum' : m.histogram ? 'histogram' : m.gauge ? 'gauge' : 'other';
        const data = m.sum ?? m.histogram ?? m.gauge;
        for (const p of data?.dataPoints ?? [])
          out.push({
            metric: m.name,
            unit: m.unit ?? '',
            kind,
            attributes: attrs(p.attributes),
            value: Number(p.sum ?? p.asDouble ?? p.asInt ?? 0),
            count: Number(p.count ?? 0),
          });
      }
  return out;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const r: OtlpReceiver = {
    url: '',
    spans: [],
    points: [],
    requests: [],
    mode: 'ok',
    async waitFor(pred, timeoutMs = 15_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const v = pred();
        if (v) return v;
        if (Date.now() > deadline) throw new Error('the OTLP receiver did not get what was expected');
        await new Promise((res) => setTimeout(res, 25));
      }
    },
    close: () => new Promise<void>((res) => (server.closeAllConnections(), server.close(() => res()))),
  };
  const answer = (res: ServerResponse, json: boolean) => {
    res.writeHead(200, { 'content-type': json ? 'application/json' : 'application/x-protobuf' });
    res.end(json ? '{}' : Buffer.alloc(0));
  };
  const server: Server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (b: Buffer) => parts.push(b));
    req.on('end', () => {
      const contentType = req.headers['content-type'] ?? '';
      const json = contentType.startsWith('application/json');
      r.requests.push({ path: req.url ?? '', contentType, headers: req.headers });
      if (r.mode === 'hang') return;
      if (r.mode === 'fail') return void res.writeHead(500).end();
      const body = Buffer.concat(parts);
      if (req.url === '/v1/traces')
        r.spans.push(...toSpans(decode(TRACE_REQUEST, body, json) as TraceShape, json));
      else if (req.url === '/v1/metrics')
        r.points.push(...toPoints(decode(METRICS_REQUEST, body, json) as MetricsShape));
      else return void res.writeHead(404).end();
      answer(res, json);
    });
  });
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
  r.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return r;
}
