/**
 * OpenTelemetry export, received by an OTLP/HTTP receiver started here and decoded as a collector would
 * (protobuf with the official .proto files, and OTLP/JSON): one span per proxied call and per WebSocket
 * response with the GenAI semantic-convention attributes, a child of the caller's `traceparent` (which
 * reaches upstream unchanged); the GenAI client metrics and the cost counter; a collector that is down,
 * failing or hanging leaves every call as it was and its losses counted in /metrics.
 */
import { randomBytes } from 'node:crypto';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RequestLogRow } from '../src/types.js';
import { MAX_ATTRIBUTE_CHARS } from '../src/telemetry/index.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from './helpers/otlp-receiver.js';
import { mustOpen, mustRefuse, openWs, wsUrl } from './helpers/ws.js';

const SPAN_KIND_CLIENT = 3;
const STATUS_ERROR = 2;

function traceparent(): { header: string; traceId: string; parentId: string } {
  const traceId = randomBytes(16).toString('hex');
  const parentId = randomBytes(8).toString('hex');
  return { header: `00-${traceId}-${parentId}-01`, traceId, parentId };
}

async function rowOf(h: Harness, accountId: string, id: string): Promise<RequestLogRow> {
  for (let i = 0; i < 400; i++) {
    await h.flushLog();
    const row = await h.kr.services.logStore.getRequest(accountId, id);
    if (row) return row;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`row ${id} not written`);
}

const spanOf = (rx: OtlpReceiver, requestId: string) =>
  rx.waitFor(() => rx.spans.find((s) => s.attributes['keyrelay.request.id'] === requestId));

/** The attributes a span must carry for its row: the GenAI conventions' names, keyrelay's own beside them. */
function expectSpanForRow(
  span: ReceivedSpan,
  row: RequestLogRow,
  requestModel: string,
  caller: ReturnType<typeof traceparent>,
) {
  expect(span.traceId).toBe(caller.traceId);
  expect(span.parentSpanId).toBe(caller.parentId);
  expect(span.kind).toBe(SPAN_KIND_CLIENT);
  expect(span.attributes).toMatchObject({
    'gen_ai.provider.name': row.provider,
    'gen_ai.operation.name': 'chat',
    'gen_ai.request.model': requestModel,
    'gen_ai.response.model': row.model,
    'gen_ai.usage.input_tokens': row.input_tokens,
    'gen_ai.usage.output_tokens': row.output_tokens,
    'server.address': '127.0.0.1',
    'keyrelay.key.id': row.key_id,
    'keyrelay.account.id': row.account_id,
    'keyrelay.cost_usd': row.cost_usd,
    'keyrelay.request.id': row.id,
  });
  expect(span.attributes['error.type']).toBeUndefined();
  if (row.method === 'WS') {
    expect(span.attributes['keyrelay.transport']).toBe('websocket');
    expect(span.attributes['http.request.method']).toBeUndefined();
  } else {
    expect(span.attributes).toMatchObject({
      'keyrelay.transport': 'http',
      'http.request.method': row.method,
      'http.response.status_code': 200,
    });
  }
  expect(span.name).toBe(`chat ${requestModel}`);
  // The span covers the call: from its arrival, for its logged latency.
  expect(Number(span.startNs / 1_000_000n)).toBe(Date.parse(row.created_at));
  expect(Number(span.endNs - span.startNs) / 1e6).toBeCloseTo(row.latency_ms, 0);
}

describe.each(['http/protobuf', 'http/json'] as const)('export over %s', (protocol) => {
  let rx: OtlpReceiver;
  let h: Harness;
  let u: { key: string; keyId: string; accountId: string };

  beforeAll(async () => {
    rx = await startOtlpReceiver();
    h = await startHarness({
      OTEL_EXPORTER_OTLP_ENDPOINT: rx.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
      OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20collector-token,x-tenant=team-a',
      OTEL_SERVICE_NAME: 'keyrelay-under-test',
      OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=test,service.namespace=gateways',
      OTEL_BSP_SCHEDULE_DELAY: '50',
      OTEL_METRIC_EXPORT_INTERVAL: '100',
    });
    u = await h.newUser();
  });
  afterAll(async () => {
    await h.close();
    await rx.close();
  });

  const openai = (caller: { header: string }) =>
    new OpenAI({
      apiKey: 'sk-test-otel',
      baseURL: `${h.url}/api/proxy/openai/v1`,
      maxRetries: 0,
      defaultHeaders: { 'proxy-api-key': u.key, traceparent: caller.header, 'proxy-user': 'end-user-7' },
    });
  const anthropic = (caller: { header: string }) =>
    new Anthropic({
      apiKey: 'sk-ant-otel',
      baseURL: `${h.url}/api/proxy/anthropic`,
      maxRetries: 0,
      defaultHeaders: { 'proxy-api-key': u.key, traceparent: caller.header, 'proxy-session': 'sess-1' },
    });

  it('makes an OpenAI chat call a child span of the caller, with its usage, cost and key', async () => {
    const caller = traceparent();
    const { data, response } = await openai(caller)
      .chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
      .withResponse();
    const id = response.headers.get('x-keyrelay-request-id')!;
    const row = await rowOf(h, u.accountId, id);
    const span = await spanOf(rx, id);
    expectSpanForRow(span, row, 'gpt-4o-mini', caller);
    expect(span.attributes['gen_ai.usage.input_tokens']).toBe(data.usage!.prompt_tokens);
    expect(span.attributes['gen_ai.usage.output_tokens']).toBe(data.usage!.completion_tokens);
    expect(span.attributes['gen_ai.response.model']).toBe(data.model);
    expect(span.attributes['keyrelay.end_user']).toBe('end-user-7');
    expect(span.attributes['keyrelay.stream']).toBe(false);
    expect(span.attributes['gen_ai.response.finish_reasons']).toEqual(
      data.choices.map((c) => c.finish_reason),
    );
    expect(row.cost_usd).toBeGreaterThan(0);
    // The caller's traceparent reaches upstream as sent.
    expect(h.openai.requests.at(-1)!.headers.traceparent).toBe(caller.header);
    expect(span.resource).toMatchObject({
      'service.name': 'keyrelay-under-test',
      'deployment.environment.name': 'test',
      'service.namespace': 'gateways',
    });
    expect(span.scope).toBe('keyrelay');
    const traces = rx.requests.find((r) => r.path === '/v1/traces')!;
    expect(traces.contentType).toBe(protocol === 'http/json' ? 'application/json' : 'application/x-protobuf');
    expect(traces.headers.authorization).toBe('Bearer collector-token');
    expect(traces.headers['x-tenant']).toBe('team-a');
  });

  it('follows the caller’s sampling decision, and forwards traceparent and tracestate as sent', async () => {
    const unsampled = traceparent();
    const header = unsampled.header.replace(/-01$/, '-00');
    const res = await fetch(`${h.url}/api/proxy/openai/v1/chat/completions`, {
      method: 'POST',
      headers: {
        'proxy-api-key': u.key,
        authorization: 'Bearer sk-x',
        'content-type': 'application/json',
        traceparent: header,
        tracestate: 'vendor=opaque-1',
      },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    expect(h.openai.requests.at(-1)!.headers).toMatchObject({
      traceparent: header,
      tracestate: 'vendor=opaque-1',
    });
    // A sampled call made after it is exported; the unsampled one never is.
    const sampled = traceparent();
    const { response } = await openai(sampled)
      .chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
      .withResponse();
    await spanOf(rx, response.headers.get('x-keyrelay-request-id')!);
    expect(
      rx.spans.some((s) => s.attributes['keyrelay.request.id'] === res.headers.get('x-keyrelay-request-id')),
    ).toBe(false);
    expect(rx.spans.some((s) => s.traceId === unsampled.traceId)).toBe(false);
  });

  it('spans a streamed OpenAI chat with the usage keyrelay read from the stream', async () => {
    const caller = traceparent();
    const { data: stream, response } = await openai(caller)
      .chat.completions.create({
        model: 'gpt-4o-mini',
        messages: [{ role: 'user', content: 'hi' }],
        stream: true,
      })
      .withResponse();
    for await (const chunk of stream) void chunk;
    const id = response.headers.get('x-keyrelay-request-id')!;
    const row = await rowOf(h, u.accountId, id);
    const span = await spanOf(rx, id);
    expectSpanForRow(span, row, 'gpt-4o-mini', caller);
    expect(row.output_tokens).toBeGreaterThan(0);
    expect(span.attributes['keyrelay.stream']).toBe(true);
    expect(span.attributes['gen_ai.response.finish_reasons']).toEqual(['stop']);
  });

  it('spans the Responses API with its status as the finish reason, streamed and not', async () => {
    const caller = traceparent();
    const { data, response } = await openai(caller)
      .responses.create({ model: 'gpt-4o-mini', input: 'hi' })
      .withResponse();
    const span = await spanOf(rx, response.headers.get('x-keyrelay-request-id')!);
    expect(span.attributes['gen_ai.response.finish_reasons']).toEqual([data.status]);
    const streamed = await openai(caller)
      .responses.create({ model: 'gpt-4o-mini', input: 'hi', stream: true })
      .withResponse();
    let status: string | undefined;
    for await (const event of streamed.data)
      if (event.type === 'response.completed') status = event.response.status;
    expect(status).toBe('completed');
    const streamedSpan = await spanOf(rx, streamed.response.headers.get('x-keyrelay-request-id')!);
    expect(streamedSpan.attributes['gen_ai.response.finish_reasons']).toEqual(['completed']);
  });

  it('spans Anthropic messages, streamed and not, cache tokens included', async () => {
    for (const stream of [false, true]) {
      const caller = traceparent();
      const req = {
        model: 'claude-sonnet-4-6',
        max_tokens: 64,
        messages: [{ role: 'user' as const, content: 'hi' }],
      };
      const { response, data } = stream
        ? await anthropic(caller)
            .messages.create({ ...req, stream: true })
            .withResponse()
        : await anthropic(caller).messages.create(req).withResponse();
      let stopReason: string | null = null;
      if ('content' in data) stopReason = data.stop_reason;
      else
        for await (const event of data)
          if (event.type === 'message_delta') stopReason = event.delta.stop_reason;
      const id = response.headers.get('x-keyrelay-request-id')!;
      const row = await rowOf(h, u.accountId, id);
      const span = await spanOf(rx, id);
      expectSpanForRow(span, row, 'claude-sonnet-4-6', caller);
      expect(span.attributes).toMatchObject({
        'gen_ai.provider.name': 'anthropic',
        'gen_ai.usage.cache_read.input_tokens': row.cache_read_tokens,
        'gen_ai.usage.cache_creation.input_tokens': row.cache_write_tokens,
        'keyrelay.session': 'sess-1',
        'keyrelay.stream': stream,
        'gen_ai.response.finish_reasons': [stopReason],
      });
      expect(stopReason).toBe('end_turn');
      expect(row.cache_read_tokens).toBeGreaterThan(0);
      expect(h.anthropic.requests.at(-1)!.headers.traceparent).toBe(caller.header);
    }
  });

  it('spans a refused call with its error type, whether or not the key is known', async () => {
    const caller = traceparent();
    const bad = await fetch(`${h.url}/api/proxy/openai/v1/chat/completions`, {
      method: 'POST',
      headers: {
        'proxy-api-key': 'kr-not-a-key',
        traceparent: caller.header,
        'content-type': 'application/json',
      },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [] }),
    });
    expect(bad.status).toBe(401);
    const code = bad.headers.get('x-keyrelay-error')!;
    const span = await spanOf(rx, bad.headers.get('x-keyrelay-request-id')!);
    expect(span.parentSpanId).toBe(caller.parentId);
    expect(span.status.code).toBe(STATUS_ERROR);
    expect(span.attributes).toMatchObject({
      'gen_ai.provider.name': 'openai',
      'error.type': code,
      'http.response.status_code': 401,
      'keyrelay.outcome': 'refused',
    });
    expect(span.attributes['keyrelay.key.id']).toBeUndefined();

    // A known key, refused by keyrelay before routing (an encoded slash): filed under the key.
    const encoded = await fetch(`${h.url}/api/proxy/openai/v1/files%2F..%2Fadmin`, {
      headers: { 'proxy-api-key': u.key },
    });
    expect(encoded.status).toBe(400);
    const refused = await spanOf(rx, encoded.headers.get('x-keyrelay-request-id')!);
    expect(refused.parentSpanId).toBe('');
    expect(refused.status.code).toBe(STATUS_ERROR);
    expect(refused.attributes).toMatchObject({
      'keyrelay.key.id': u.keyId,
      'error.type': encoded.headers.get('x-keyrelay-error'),
      'http.response.status_code': 400,
    });

    // Upstream's own error answer passes through; its status is the error type.
    const upstream400 = await fetch(`${h.url}/api/proxy/openai/v1/chat/completions`, {
      method: 'POST',
      headers: { 'proxy-api-key': u.key, authorization: 'Bearer sk-x', 'content-type': 'application/json' },
      body: '{',
    });
    expect(upstream400.status).toBe(400);
    expect(upstream400.headers.get('x-keyrelay-error')).toBeNull();
    const failed = await spanOf(rx, upstream400.headers.get('x-keyrelay-request-id')!);
    expect(failed.attributes).toMatchObject({ 'error.type': '400', 'keyrelay.outcome': 'upstream_error' });
  });

  it('spans each response on a WebSocket, as a child of the upgrade request', async () => {
    const caller = traceparent();
    const c = await mustOpen(
      openWs(wsUrl(h.url, '/api/proxy/openai/v1/responses'), {
        headers: { 'proxy-api-key': u.key, authorization: 'Bearer sk-test-otel', traceparent: caller.header },
      }),
    );
    c.ws.send(JSON.stringify({ type: 'response.create', model: 'gpt-4o-mini', input: 'one' }));
    await c.waitFor((e) => e.type === 'response.completed');
    c.ws.close();
    await c.closed;
    expect(h.openai.ws.connections.at(-1)!.headers.traceparent).toBe(caller.header);
    const span = await rx.waitFor(() =>
      rx.spans.find(
        (s) => s.traceId === caller.traceId && s.attributes['keyrelay.transport'] === 'websocket',
      ),
    );
    const row = await rowOf(h, u.accountId, String(span.attributes['keyrelay.request.id']));
    expect(row.method).toBe('WS');
    expectSpanForRow(span, row, 'gpt-4o-mini', caller);
    expect(span.attributes['gen_ai.response.finish_reasons']).toEqual(['completed']);
    // The socket itself (its 101 row) is no GenAI operation: one span, for the one response.
    await h.flushLog();
    expect(rx.spans.filter((s) => s.traceId === caller.traceId)).toHaveLength(1);
  });

  it('clips a caller-chosen model name in spans and metrics', async () => {
    const model = 'm'.repeat(100_000);
    const res = await fetch(`${h.url}/api/proxy/openai/v1/chat/completions`, {
      method: 'POST',
      headers: { 'proxy-api-key': u.key, authorization: 'Bearer sk-x', 'content-type': 'application/json' },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
    });
    await res.arrayBuffer();
    const span = await spanOf(rx, res.headers.get('x-keyrelay-request-id')!);
    expect(span.attributes['gen_ai.request.model']).toBe(model.slice(0, MAX_ATTRIBUTE_CHARS));
    expect(span.name).toBe(`chat ${model.slice(0, MAX_ATTRIBUTE_CHARS)}`);
    const point = await rx.waitFor(() =>
      rx.points.find((p) => String(p.attributes['gen_ai.request.model'] ?? '').startsWith('mmm')),
    );
    expect(point.attributes['gen_ai.request.model']).toBe(model.slice(0, MAX_ATTRIBUTE_CHARS));
  });

  it('spans a WebSocket handshake refused for a bad key', async () => {
    const caller = traceparent();
    const refusal = await mustRefuse(
      openWs(wsUrl(h.url, '/api/proxy/openai/v1/responses'), {
        headers: { 'proxy-api-key': 'kr-not-a-key', traceparent: caller.header },
      }),
    );
    expect(refusal.status).toBe(401);
    const span = await spanOf(rx, String(refusal.headers['x-keyrelay-request-id']));
    expect(span.parentSpanId).toBe(caller.parentId);
    expect(span.status.code).toBe(STATUS_ERROR);
    expect(span.attributes).toMatchObject({
      'gen_ai.provider.name': 'openai',
      'error.type': refusal.headers['x-keyrelay-error'],
      'http.response.status_code': 401,
    });
    expect(span.attributes['keyrelay.key.id']).toBeUndefined();
  });

  it('exports the GenAI client metrics and the cost counter', async () => {
    const metric = (name: string, more: (p: OtlpReceiver['points'][number]) => boolean = () => true) =>
      rx.waitFor(() =>
        // Sums are cumulative: the last export has them all.
        rx.points.findLast(
          (p) => p.metric === name && p.attributes['gen_ai.provider.name'] === 'anthropic' && more(p),
        ),
      );
    const input = await metric(
      'gen_ai.client.token.usage',
      (p) => p.attributes['gen_ai.token.type'] === 'input',
    );
    expect(input).toMatchObject({ kind: 'histogram', unit: '{token}' });
    expect(input.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.request.model': 'claude-sonnet-4-6',
    });
    expect(input.count).toBeGreaterThanOrEqual(2);
    const output = await metric(
      'gen_ai.client.token.usage',
      (p) => p.attributes['gen_ai.token.type'] === 'output',
    );
    expect(output.value).toBeGreaterThan(0);
    const duration = await metric('gen_ai.client.operation.duration');
    expect(duration).toMatchObject({ kind: 'histogram', unit: 's' });
    expect(duration.count).toBeGreaterThanOrEqual(2);
    const cost = await metric('keyrelay.client.cost', (p) => p.value > 0);
    expect(cost).toMatchObject({ kind: 'sum', unit: 'USD' });
    expect(cost.attributes['keyrelay.key.id']).toBe(u.keyId);
  });
});

describe('a collector that is down, failing or hanging', () => {
  const chat = (h: Harness, key: string) =>
    fetch(`${h.url}/api/proxy/openai/v1/chat/completions`, {
      method: 'POST',
      headers: { 'proxy-api-key': key, authorization: 'Bearer sk-x', 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
    });
  const dropped = async (h: Harness, reason: string) => {
    const text = await h.kr.services.metrics.registry.getSingleMetricAsString(
      'keyrelay_otel_spans_dropped_total',
    );
    const m = new RegExp(`reason="${reason}"} (\\d+)`).exec(text);
    return m ? Number(m[1]) : 0;
  };
  const until = async (check: () => Promise<boolean>) => {
    for (let i = 0; i < 600; i++) {
      if (await check()) return;
      await new Promise((r) => setTimeout(r, 25));
    }
    throw new Error('condition not reached');
  };

  it('answers every call while the collector refuses connections, and counts the spans lost', async () => {
    const gone = await startOtlpReceiver();
    await gone.close(); // its port now refuses connections
    const h = await startHarness({
      OTEL_EXPORTER_OTLP_ENDPOINT: gone.url,
      OTEL_BSP_SCHEDULE_DELAY: '20',
      OTEL_EXPORTER_OTLP_TIMEOUT: '1000',
    });
    try {
      const u = await h.newUser();
      for (let i = 0; i < 5; i++) expect((await chat(h, u.key)).status).toBe(200);
      await until(async () => (await dropped(h, 'export_failed')) >= 5);
    } finally {
      await h.close();
    }
  });

  it('answers every call while the collector answers 500, and counts the spans lost', async () => {
    const rx = await startOtlpReceiver();
    rx.mode = 'fail';
    const h = await startHarness({
      OTEL_EXPORTER_OTLP_ENDPOINT: rx.url,
      OTEL_BSP_SCHEDULE_DELAY: '20',
      OTEL_EXPORTER_OTLP_TIMEOUT: '2000',
    });
    try {
      const u = await h.newUser();
      for (let i = 0; i < 3; i++) expect((await chat(h, u.key)).status).toBe(200);
      await until(async () => (await dropped(h, 'export_failed')) >= 3);
      expect(rx.requests.length).toBeGreaterThan(0);
    } finally {
      await h.close();
      await rx.close();
    }
  });

  it('answers every call while the collector hangs; spans past the queue are dropped and counted', async () => {
    const rx = await startOtlpReceiver();
    rx.mode = 'hang';
    const h = await startHarness(
      {
        OTEL_EXPORTER_OTLP_ENDPOINT: rx.url,
        OTEL_BSP_SCHEDULE_DELAY: '20',
        OTEL_EXPORTER_OTLP_TIMEOUT: '600000',
      },
      { telemetry: { maxQueuedSpans: 2 } },
    );
    try {
      const u = await h.newUser();
      expect((await chat(h, u.key)).status).toBe(200);
      await rx.waitFor(() => rx.requests.length > 0); // the first export is now hanging
      const answers = await Promise.all(Array.from({ length: 10 }, () => chat(h, u.key)));
      expect(answers.map((a) => a.status)).toEqual(Array(10).fill(200));
      await until(async () => (await dropped(h, 'queue_full')) >= 8);
    } finally {
      await rx.close(); // the hanging export fails now, so the stop's flush is not held
      await h.close();
    }
  });
});
