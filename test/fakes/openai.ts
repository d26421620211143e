import { randomBytes } from 'node:crypto';
import { renderOpenAIBatches } from './batches.js';
import { renderImages, renderModeration, renderSpeech, renderTranscription } from './openai-media.js';
import { renderResponses } from './openai-responses.js';
import type { Scenario } from './scenario.js';
import {
  FAKE_CREATED,
  deriveId,
  eventCount,
  jsonResponse,
  parseJsonBody,
  sseResponse,
  textDeltas,
  type FakeCommonOptions,
  type FakeRequest,
  type Headers,
  type RenderedResponse,
} from './render.js';

/** Flat usage numbers; `x-fake-usage` uses the same keys. */
export interface FakeOpenAIUsage {
  prompt_tokens: number;
  completion_tokens: number;
  cached_tokens: number;
  reasoning_tokens: number;
}

export interface FakeOpenAIOptions extends FakeCommonOptions {
  usage?: Partial<FakeOpenAIUsage>;
  /** Default content deltas per stream (5). */
  events?: number;
  /** Model ids listed by GET /v1/models. */
  models?: string[];
}

export const DEFAULT_OPENAI_USAGE: FakeOpenAIUsage = {
  prompt_tokens: 11,
  completion_tokens: 7,
  cached_tokens: 3,
  reasoning_tokens: 2,
};
const DEFAULT_MODELS = ['gpt-4o-mini', 'gpt-4o', 'text-embedding-3-small'];
const FINGERPRINT = 'fp_fake0001';
const BAD_JSON =
  "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly.)";

export function resolveOpenAIUsage(opts: FakeOpenAIOptions, scenario: Scenario): FakeOpenAIUsage {
  return { ...DEFAULT_OPENAI_USAGE, ...opts.usage, ...scenario.usage };
}

function baseHeaders(): Headers {
  return {
    'x-request-id': `req_${randomBytes(16).toString('hex')}`,
    'openai-processing-ms': '12',
    'openai-version': '2020-10-01',
    'openai-organization': 'org-fake',
  };
}

const ERRORS: Record<number, { type: string; code: string | null; message: string }> = {
  400: { type: 'invalid_request_error', code: null, message: 'Invalid request (fake upstream).' },
  401: {
    type: 'invalid_request_error',
    code: 'invalid_api_key',
    message:
      'Incorrect API key provided: sk-fake***. You can find your API key at https://platform.openai.com/account/api-keys.',
  },
  403: {
    type: 'invalid_request_error',
    code: 'unsupported_country_region_territory',
    message: 'Country, region, or territory not supported',
  },
  404: {
    type: 'invalid_request_error',
    code: 'model_not_found',
    message: 'The model does not exist or you do not have access to it.',
  },
  429: {
    type: 'requests',
    code: 'rate_limit_exceeded',
    message:
      'Rate limit reached for requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.',
  },
  500: {
    type: 'server_error',
    code: null,
    message: 'The server had an error while processing your request. Sorry about that!',
  },
  503: {
    type: 'server_error',
    code: null,
    message: 'The engine is currently overloaded, please try again later.',
  },
};

export function renderOpenAIError(
  status: number,
  override: { message?: string; code?: string | null } = {},
): RenderedResponse {
  const known = ERRORS[status] ?? {
    type: 'api_error',
    code: null,
    message: `Fake upstream error ${status}.`,
  };
  const headers = baseHeaders();
  if (status === 429) {
    Object.assign(headers, {
      'retry-after': '1',
      'x-ratelimit-limit-requests': '3',
      'x-ratelimit-remaining-requests': '0',
      'x-ratelimit-reset-requests': '20s',
    });
  }
  const code = override.code !== undefined ? override.code : known.code;
  const error = { message: override.message ?? known.message, type: known.type, param: null, code };
  return jsonResponse(status, headers, { error });
}

function chatUsage(u: FakeOpenAIUsage): Record<string, unknown> {
  return {
    prompt_tokens: u.prompt_tokens,
    completion_tokens: u.completion_tokens,
    total_tokens: u.prompt_tokens + u.completion_tokens,
    prompt_tokens_details: { cached_tokens: u.cached_tokens, audio_tokens: 0 },
    completion_tokens_details: {
      reasoning_tokens: u.reasoning_tokens,
      audio_tokens: 0,
      accepted_prediction_tokens: 0,
      rejected_prediction_tokens: 0,
    },
  };
}

const sse = (value: unknown): string => `data: ${JSON.stringify(value)}\n\n`;
function renderChat(
  req: FakeRequest,
  body: Record<string, unknown>,
  usage: FakeOpenAIUsage,
  n: number,
): RenderedResponse {
  const model = typeof body.model === 'string' ? body.model : 'gpt-4o-mini';
  const id = `chatcmpl-${deriveId(req)}`;
  const deltas = textDeltas(n);
  if (body.stream !== true) {
    return jsonResponse(200, baseHeaders(), {
      id,
      object: 'chat.completion',
      created: FAKE_CREATED,
      model,
      choices: [
        {
          index: 0,
          message: { role: 'assistant', content: deltas.join(''), refusal: null, annotations: [] },
          logprobs: null,
          finish_reason: 'stop',
        },
      ],
      usage: chatUsage(usage),
      service_tier: 'default',
      system_fingerprint: FINGERPRINT,
    });
  }
  const opts = body.stream_options as { include_usage?: unknown } | undefined;
  const includeUsage = opts?.include_usage === true;
  const chunk = (choices: unknown[], usageValue?: unknown): string =>
    sse({
      id,
      object: 'chat.completion.chunk',
      created: FAKE_CREATED,
      model,
      service_tier: 'default',
      system_fingerprint: FINGERPRINT,
      choices,
      ...(includeUsage ? { usage: usageValue ?? null } : {}),
    });
  const choice = (delta: unknown, finish: string | null): unknown => ({
    index: 0,
    delta,
    logprobs: null,
    finish_reason: finish,
  });
  const pieces = [
    chunk([choice({ role: 'assistant', content: '', refusal: null }, null)]),
    ...deltas.map((t) => chunk([choice({ content: t }, null)])),
    chunk([choice({}, 'stop')]),
  ];
  if (includeUsage) pieces.push(chunk([], chatUsage(usage)));
  pieces.push('data: [DONE]\n\n');
  return sseResponse(baseHeaders(), pieces);
}

function renderEmbeddings(body: Record<string, unknown>, usage: FakeOpenAIUsage): RenderedResponse {
  const inputs = Array.isArray(body.input) ? body.input : [body.input];
  const base64 = body.encoding_format === 'base64';
  const data = inputs.map((_, index) => {
    const vector = Array.from({ length: 8 }, (_v, i) => (index + 1) * 0.125 + i * 0.0625);
    const embedding = base64 ? Buffer.from(new Float32Array(vector).buffer).toString('base64') : vector;
    return { object: 'embedding', index, embedding };
  });
  return jsonResponse(200, baseHeaders(), {
    object: 'list',
    data,
    model: typeof body.model === 'string' ? body.model : 'text-embedding-3-small',
    usage: { prompt_tokens: usage.prompt_tokens, total_tokens: usage.prompt_tokens },
  });
}

const modelObject = (id: string): Record<string, unknown> => ({
  id,
  object: 'model',
  created: FAKE_CREATED,
  owned_by: 'system',
});

/** Renders the OpenAI answer to a request; a pure function of the request, options and scenario. */
export function renderOpenAI(
  req: FakeRequest,
  scenario: Scenario,
  opts: FakeOpenAIOptions = {},
): RenderedResponse {
  if (scenario.status !== undefined && scenario.status >= 400) return renderOpenAIError(scenario.status);
  const path = req.path.split('?')[0] ?? '';
  const body = parseJsonBody(req.body) ?? {};
  const usage = resolveOpenAIUsage(opts, scenario);
  const n = eventCount(scenario, opts.events ?? 5);
  const models = opts.models ?? DEFAULT_MODELS;
  const invalid = (): RenderedResponse =>
    renderOpenAIError(404, { message: `Invalid URL (${req.method} ${path})`, code: null });
  if (req.method === 'POST' && path === '/v1/chat/completions') {
    if (parseJsonBody(req.body) === undefined) return renderOpenAIError(400, { message: BAD_JSON });
    return renderChat(req, body, usage, n);
  }
  if (req.method === 'POST' && path === '/v1/responses') {
    if (parseJsonBody(req.body) === undefined) return renderOpenAIError(400, { message: BAD_JSON });
    return renderResponses(req, body, usage, n, baseHeaders(), scenario.toolCalls);
  }
  if (req.method === 'POST' && path === '/v1/embeddings') return renderEmbeddings(body, usage);
  const error = (status: number, message: string) => renderOpenAIError(status, { message });
  if (req.method === 'POST' && (path === '/v1/audio/transcriptions' || path === '/v1/audio/translations'))
    return renderTranscription(req, scenario, baseHeaders(), path.endsWith('translations'), error);
  if (req.method === 'POST' && path === '/v1/audio/speech') return renderSpeech(req, scenario, baseHeaders());
  if (req.method === 'POST' && (path === '/v1/images/generations' || path === '/v1/images/edits'))
    return renderImages(req, scenario, baseHeaders(), path.endsWith('edits'), error);
  if (req.method === 'POST' && path === '/v1/moderations') return renderModeration(req, baseHeaders());
  const batch = renderOpenAIBatches(req, scenario, baseHeaders(), error);
  if (batch) return batch;
  if (req.method === 'GET' && path === '/v1/models') {
    return jsonResponse(200, baseHeaders(), { object: 'list', data: models.map(modelObject) });
  }
  if (req.method === 'GET' && path.startsWith('/v1/models/')) {
    const id = decodeURIComponent(path.slice('/v1/models/'.length));
    if (models.includes(id)) return jsonResponse(200, baseHeaders(), modelObject(id));
    return renderOpenAIError(404, { message: `The model '${id}' does not exist` });
  }
  return invalid();
}
