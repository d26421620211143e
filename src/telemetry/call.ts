/**
 * What one finished call says in OpenTelemetry's words: the GenAI semantic conventions
 * (https://opentelemetry.io/docs/specs/semconv/gen-ai/) and keyrelay's own `keyrelay.*` attributes.
 */
import type { Attributes } from '@opentelemetry/api';
import { endpointOf, providerModule, type EndpointClass } from '../providers/index.js';
import type { Provider, RequestLogRow } from '../types.js';

/** A log row, or what is known of a call refused before it had a key to be filed under. */
export type CallRecord = Pick<
  RequestLogRow,
  | 'id'
  | 'created_at'
  | 'path'
  | 'method'
  | 'model'
  | 'stream'
  | 'status'
  | 'outcome'
  | 'error_code'
  | 'latency_ms'
  | 'input_tokens'
  | 'cache_read_tokens'
  | 'cache_write_tokens'
  | 'output_tokens'
  | 'usage_source'
  | 'cost_usd'
  | 'end_user'
  | 'session'
> & { provider: Provider | null; key_id: string | null; account_id: string | null };

/** The spec's well-known `gen_ai.operation.name` values; other calls (files, batches…) keep their class. */
const OPERATION: Partial<Record<EndpointClass, string>> = {
  chat: 'chat',
  responses: 'chat',
  messages: 'chat',
  realtime: 'chat',
  completions: 'text_completion',
  complete: 'text_completion',
  embeddings: 'embeddings',
};

function operationOf(call: CallRecord): string {
  if (!call.provider) return 'unknown';
  const q = call.path.indexOf('?');
  const cls = endpointOf(call.provider, q === -1 ? call.path : call.path.slice(0, q)).class;
  return OPERATION[cls] ?? cls;
}

/**
 * `error.type`: keyrelay's code, else the error status upstream answered with (as the HTTP conventions
 * give it), else how the call ended (a caller that went away).
 */
function errorTypeOf(call: CallRecord): string | null {
  if (call.error_code) return call.error_code;
  if (call.status >= 400) return String(call.status);
  return call.outcome === 'ok' ? null : call.outcome;
}

/**
 * Longest attribute value sent: a model name comes from the caller's body, unbounded, and each distinct one
 * is a metric series kept until exit (the SDK caps series at 2,000 per metric, then overflows them).
 */
export const MAX_ATTRIBUTE_CHARS = 256;

export interface Upstream {
  address: string;
  port: number;
}

/** What a call's span and its metrics share, worked out once. */
export interface CallFacts {
  operation: string;
  /** `gen_ai.provider.name`; null for a call refused before its provider was known. */
  provider: string | null;
  requestModel: string | null;
  /** The model the response names: only when usage was read from it (else the row's model is the request's). */
  responseModel: string | null;
  errorType: string | null;
  upstream: Upstream | null;
  /** `gen_ai.response.finish_reasons`: span only (the conventions keep it off the metrics). */
  finishReasons: readonly string[] | null;
}

export function callFacts(
  call: CallRecord,
  requestModel: string | null,
  upstream: Upstream | null,
  finishReasons: readonly string[] | null,
): CallFacts {
  const responseModel = call.usage_source !== 'none' && call.model ? call.model : null;
  return {
    operation: operationOf(call),
    provider: call.provider ? providerModule(call.provider).genAiName : null,
    requestModel: requestModel ? requestModel.slice(0, MAX_ATTRIBUTE_CHARS) : null,
    responseModel: responseModel ? responseModel.slice(0, MAX_ATTRIBUTE_CHARS) : null,
    errorType: errorTypeOf(call),
    upstream,
    finishReasons: finishReasons && finishReasons.length > 0 ? finishReasons : null,
  };
}

/** The attributes every metric of a call carries (the conventions' GenAI client metric attributes). */
export function metricAttributes(f: CallFacts): Attributes {
  const a: Attributes = { 'gen_ai.operation.name': f.operation };
  if (f.provider) a['gen_ai.provider.name'] = f.provider;
  if (f.requestModel) a['gen_ai.request.model'] = f.requestModel;
  if (f.responseModel) a['gen_ai.response.model'] = f.responseModel;
  if (f.upstream) {
    a['server.address'] = f.upstream.address;
    a['server.port'] = f.upstream.port;
  }
  return a;
}

/** The attributes of a call's span: the metrics' and the call's own. Absent values are left out. */
export function spanAttributes(call: CallRecord, f: CallFacts): Attributes {
  const a = metricAttributes(f);
  // A WebSocket response (its row's method is `WS`) is no HTTP exchange: the http.* attributes stay off.
  const websocket = call.method === 'WS';
  a['keyrelay.transport'] = websocket ? 'websocket' : 'http';
  a['keyrelay.request.id'] = call.id;
  a['keyrelay.outcome'] = call.outcome;
  a['keyrelay.stream'] = call.stream;
  if (!websocket) a['http.request.method'] = call.method;
  if (!websocket && call.status > 0) a['http.response.status_code'] = call.status;
  if (call.input_tokens !== null) a['gen_ai.usage.input_tokens'] = call.input_tokens;
  if (call.output_tokens !== null) a['gen_ai.usage.output_tokens'] = call.output_tokens;
  if (call.cache_read_tokens !== null) a['gen_ai.usage.cache_read.input_tokens'] = call.cache_read_tokens;
  if (call.cache_write_tokens !== null)
    a['gen_ai.usage.cache_creation.input_tokens'] = call.cache_write_tokens;
  if (f.finishReasons) a['gen_ai.response.finish_reasons'] = [...f.finishReasons];
  if (f.errorType) a['error.type'] = f.errorType;
  if (call.key_id) a['keyrelay.key.id'] = call.key_id;
  if (call.account_id) a['keyrelay.account.id'] = call.account_id;
  if (call.cost_usd !== null) a['keyrelay.cost_usd'] = call.cost_usd;
  if (call.end_user) a['keyrelay.end_user'] = call.end_user;
  if (call.session) a['keyrelay.session'] = call.session;
  return a;
}
