import { randomBytes } from 'node:crypto';
import { renderAnthropicBatches } from './batches.js';
import type { Scenario } from './scenario.js';
import { runAnthropicServerTools, type AnthropicToolRun } from './server-tools.js';
import {
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

/** Usage numbers; `x-fake-usage` uses the same keys. */
export interface FakeAnthropicUsage {
  input_tokens: number;
  output_tokens: number;
  cache_creation_input_tokens: number;
  /** Of cache_creation_input_tokens, those written with the 1-hour TTL (the rest: 5 minutes). */
  cache_creation_1h_input_tokens: number;
  cache_read_input_tokens: number;
}

export interface FakeAnthropicOptions extends FakeCommonOptions {
  usage?: Partial<FakeAnthropicUsage>;
  /** Default text deltas per stream (5). */
  events?: number;
  /** Model ids listed by GET /v1/models. */
  models?: string[];
}

export const DEFAULT_ANTHROPIC_USAGE: FakeAnthropicUsage = {
  input_tokens: 25,
  output_tokens: 15,
  cache_creation_input_tokens: 5,
  cache_creation_1h_input_tokens: 0,
  cache_read_input_tokens: 10,
};
const DEFAULT_MODELS = ['claude-sonnet-5-5', 'claude-opus-5-5'];

export function resolveAnthropicUsage(opts: FakeAnthropicOptions, scenario: Scenario): FakeAnthropicUsage {
  return { ...DEFAULT_ANTHROPIC_USAGE, ...opts.usage, ...scenario.usage };
}

function baseHeaders(): Headers {
  return {
    'request-id': `req_011${randomBytes(12).toString('hex')}`,
    'anthropic-organization-id': '00000000-0000-4000-8000-000000000fae',
  };
}

const ERRORS: Record<number, { type: string; message: string }> = {
  400: { type: 'invalid_request_error', message: 'Invalid request (fake upstream).' },
  401: { type: 'authentication_error', message: 'invalid x-api-key' },
  403: {
    type: 'permission_error',
    message: 'Your API key does not have permission to use the specified resource.',
  },
  404: { type: 'not_found_error', message: 'Not found' },
  413: { type: 'request_too_large', message: 'Request exceeds the maximum allowed number of bytes.' },
  429: {
    type: 'rate_limit_error',
    message: 'Number of request tokens has exceeded your per-minute rate limit.',
  },
  500: { type: 'api_error', message: 'Internal server error' },
  529: { type: 'overloaded_error', message: 'Overloaded' },
};

export function renderAnthropicError(status: number, message?: string): RenderedResponse {
  const known = ERRORS[status] ?? { type: 'api_error', message: `Fake upstream error ${status}.` };
  const headers = baseHeaders();
  if (status === 429) {
    Object.assign(headers, {
      'retry-after': '1',
      'anthropic-ratelimit-requests-limit': '50',
      'anthropic-ratelimit-requests-remaining': '0',
      'anthropic-ratelimit-requests-reset': '2026-01-01T00:00:01Z',
    });
  }
  return jsonResponse(status, headers, {
    type: 'error',
    error: { type: known.type, message: message ?? known.message },
  });
}

function fullUsage(
  u: FakeAnthropicUsage,
  outputTokens: number,
  tools: AnthropicToolRun | null = null,
): Record<string, unknown> {
  return {
    ...(tools ? { server_tool_use: tools.serverToolUse } : {}),
    input_tokens: u.input_tokens,
    cache_creation_input_tokens: u.cache_creation_input_tokens,
    cache_read_input_tokens: u.cache_read_input_tokens,
    cache_creation: {
      ephemeral_5m_input_tokens: u.cache_creation_input_tokens - u.cache_creation_1h_input_tokens,
      ephemeral_1h_input_tokens: u.cache_creation_1h_input_tokens,
    },
    output_tokens: outputTokens,
    service_tier: 'standard',
  };
}

const event = (value: { type: string; [k: string]: unknown }): string =>
  `event: ${value.type}\ndata: ${JSON.stringify(value)}\n\n`;

function renderMessages(
  req: FakeRequest,
  body: Record<string, unknown>,
  usage: FakeAnthropicUsage,
  n: number,
  toolCalls: number,
): RenderedResponse {
  const model = typeof body.model === 'string' ? body.model : 'claude-sonnet-5-5';
  const id = `msg_01${deriveId(req)}`;
  const deltas = textDeltas(n);
  const tools = runAnthropicServerTools(body.tools, toolCalls, deriveId(req, 8));
  const container = tools?.container ? { container: tools.container } : {};
  const message = (
    content: unknown[],
    stop: string | null,
    u: Record<string, unknown>,
  ): Record<string, unknown> => ({
    id,
    type: 'message',
    role: 'assistant',
    model,
    content,
    stop_reason: stop,
    stop_sequence: null,
    usage: u,
  });
  if (body.stream !== true) {
    const content = [...(tools?.content ?? []), { type: 'text', text: deltas.join('') }];
    return jsonResponse(200, baseHeaders(), {
      ...message(content, 'end_turn', fullUsage(usage, usage.output_tokens, tools)),
      ...container,
    });
  }
  const toolBlocks = tools?.content ?? [];
  const textIndex = toolBlocks.length;
  // The real API reports output_tokens 1 at the start; message_delta carries the cumulative totals.
  const pieces = [
    event({
      type: 'message_start',
      message: message(
        [],
        null,
        fullUsage(
          usage,
          Math.min(1, usage.output_tokens),
          tools && { ...tools, serverToolUse: { web_search_requests: 0, web_fetch_requests: 0 } },
        ),
      ),
    }),
    // Server tool blocks arrive whole in content_block_start (their input as one input_json_delta).
    ...toolBlocks.flatMap((block, index) => [
      event({ type: 'content_block_start', index, content_block: block }),
      event({ type: 'content_block_stop', index }),
    ]),
    event({ type: 'content_block_start', index: textIndex, content_block: { type: 'text', text: '' } }),
    event({ type: 'ping' }),
    ...deltas.map((text) =>
      event({ type: 'content_block_delta', index: textIndex, delta: { type: 'text_delta', text } }),
    ),
    event({ type: 'content_block_stop', index: textIndex }),
    event({
      type: 'message_delta',
      delta: { stop_reason: 'end_turn', stop_sequence: null, ...container },
      usage: {
        input_tokens: usage.input_tokens,
        cache_creation_input_tokens: usage.cache_creation_input_tokens,
        cache_read_input_tokens: usage.cache_read_input_tokens,
        output_tokens: usage.output_tokens,
        ...(tools ? { server_tool_use: tools.serverToolUse } : {}),
      },
    }),
    event({ type: 'message_stop' }),
  ];
  return sseResponse(baseHeaders(), pieces);
}

const modelObject = (id: string): Record<string, unknown> => ({
  type: 'model',
  id,
  display_name: id,
  created_at: '2025-09-29T00:00:00Z',
});

/** Renders the Anthropic answer to a request; a pure function of the request, options and scenario. */
export function renderAnthropic(
  req: FakeRequest,
  scenario: Scenario,
  opts: FakeAnthropicOptions = {},
): RenderedResponse {
  if (scenario.status !== undefined && scenario.status >= 400) return renderAnthropicError(scenario.status);
  const path = req.path.split('?')[0] ?? '';
  const body = parseJsonBody(req.body);
  const usage = resolveAnthropicUsage(opts, scenario);
  const models = opts.models ?? DEFAULT_MODELS;
  if (req.method === 'POST' && path === '/v1/messages') {
    if (body === undefined)
      return renderAnthropicError(400, 'There was an issue with the request body: invalid JSON');
    return renderMessages(req, body, usage, eventCount(scenario, opts.events ?? 5), scenario.toolCalls);
  }
  if (req.method === 'POST' && path === '/v1/messages/count_tokens') {
    if (body === undefined)
      return renderAnthropicError(400, 'There was an issue with the request body: invalid JSON');
    return jsonResponse(200, baseHeaders(), { input_tokens: usage.input_tokens });
  }
  const batch = renderAnthropicBatches(req, scenario, baseHeaders());
  if (batch) return batch;
  if (req.method === 'GET' && path === '/v1/models') {
    return jsonResponse(200, baseHeaders(), {
      data: models.map(modelObject),
      has_more: false,
      first_id: models[0] ?? null,
      last_id: models[models.length - 1] ?? null,
    });
  }
  if (req.method === 'GET' && path.startsWith('/v1/models/')) {
    const id = decodeURIComponent(path.slice('/v1/models/'.length));
    if (models.includes(id)) return jsonResponse(200, baseHeaders(), modelObject(id));
    return renderAnthropicError(404, `model: ${id}`);
  }
  return renderAnthropicError(404, 'Not Found');
}
