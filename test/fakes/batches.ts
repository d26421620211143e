/**
 * The fakes' batch endpoints, shaped as documented: OpenAI files and batches
 * (https://platform.openai.com/docs/api-reference/batch) and Anthropic Message Batches
 * (https://docs.anthropic.com/en/api/creating-message-batches). Pure functions of the request like the rest
 * of the fakes: a batch is `validating`/`in_progress` when created and finished when retrieved, and its
 * results have `x-fake-usage` `lines` lines (default 3), of which `failed` (default 1) failed and `broken`
 * (default 0) more are not JSON. A file whose id is `file-in-<model>` is a batch input file instead: `lines`
 * requests to that model, as https://platform.openai.com/docs/guides/batch shows them.
 */
import { DEFAULT_ANTHROPIC_USAGE } from './anthropic.js';
import { DEFAULT_OPENAI_USAGE } from './openai.js';
import { multipartFields } from './openai-media.js';
import type { Scenario } from './scenario.js';
import {
  FAKE_CREATED,
  deriveId,
  jsonResponse,
  parseJsonBody,
  sha256,
  type FakeRequest,
  type Headers,
  type RenderedResponse,
} from './render.js';

export const FAKE_BATCH_LINES = 3;
export const FAKE_BATCH_FAILED = 1;
export const FAKE_BATCH_OPENAI_MODEL = 'gpt-4o-mini';
export const FAKE_BATCH_ANTHROPIC_MODEL = 'claude-sonnet-4-6';

function shape(scenario: Scenario): {
  lines: number;
  failed: number;
  broken: number;
  webSearches: number;
  container: boolean;
} {
  return {
    lines: scenario.usage?.lines ?? FAKE_BATCH_LINES,
    failed: scenario.usage?.failed ?? FAKE_BATCH_FAILED,
    broken: scenario.usage?.broken ?? 0,
    // Server tools in each succeeded Anthropic line: `usage.server_tool_use` and the message's container.
    webSearches: scenario.usage?.web_searches ?? 0,
    container: (scenario.usage?.containers ?? 0) > 0,
  };
}

function jsonl(headers: Headers, type: string, lines: string[]): RenderedResponse {
  return {
    status: 200,
    headers: { 'content-type': type, ...headers },
    pieces: lines.map((l) => `${l}\n`),
    stream: false,
  };
}

// ---- OpenAI ----

function openaiBatch(id: string, over: Record<string, unknown>): Record<string, unknown> {
  return {
    id,
    object: 'batch',
    endpoint: '/v1/chat/completions',
    errors: null,
    input_file_id: 'file-in',
    completion_window: '24h',
    status: 'validating',
    output_file_id: null,
    error_file_id: null,
    created_at: FAKE_CREATED,
    in_progress_at: null,
    expires_at: FAKE_CREATED + 86_400,
    finalizing_at: null,
    completed_at: null,
    failed_at: null,
    expired_at: null,
    cancelling_at: null,
    cancelled_at: null,
    request_counts: { total: 0, completed: 0, failed: 0 },
    metadata: null,
    ...over,
  };
}

/** The fake's answer to an OpenAI files or batches request, or undefined when the path is neither. */
export function renderOpenAIBatches(
  req: FakeRequest,
  scenario: Scenario,
  headers: Headers,
  error: (status: number, message: string) => RenderedResponse,
): RenderedResponse | undefined {
  const path = req.path.split('?')[0] ?? '';
  const { lines, failed, broken } = shape(scenario);
  if (req.method === 'POST' && path === '/v1/files') {
    const f = multipartFields(req);
    if (!f) return error(400, 'Could not parse multipart form');
    return jsonResponse(200, headers, {
      id: `file-${sha256(req.body).slice(0, 24)}`,
      object: 'file',
      bytes: req.body.length,
      created_at: FAKE_CREATED,
      filename: 'batch.jsonl',
      purpose: f.purpose ?? 'batch',
      status: 'processed',
      expires_at: null,
      status_details: null,
    });
  }
  if (req.method === 'POST' && path === '/v1/batches') {
    const body = parseJsonBody(req.body) ?? {};
    return jsonResponse(
      200,
      headers,
      openaiBatch(`batch_${deriveId(req, 24)}`, {
        input_file_id: body.input_file_id,
        endpoint: body.endpoint,
        metadata: body.metadata ?? null,
      }),
    );
  }
  const one = /^\/v1\/batches\/([^/]+)$/.exec(path);
  if (req.method === 'GET' && one) {
    const id = one[1]!;
    return jsonResponse(
      200,
      headers,
      openaiBatch(id, {
        status: 'completed',
        output_file_id: `file-out-${id}`,
        in_progress_at: FAKE_CREATED + 1,
        finalizing_at: FAKE_CREATED + 2,
        completed_at: FAKE_CREATED + 3,
        request_counts: { total: lines, completed: lines - failed, failed },
      }),
    );
  }
  const content = /^\/v1\/files\/([^/]+)\/content$/.exec(path);
  const input = content && /^file-in-(.+)$/.exec(decodeURIComponent(content[1]!));
  if (req.method === 'GET' && input) {
    const model = input[1]!;
    const out = Array.from({ length: lines }, (_, i) =>
      JSON.stringify({
        custom_id: `request-${i}`,
        method: 'POST',
        url: '/v1/chat/completions',
        body: { model, messages: [{ role: 'user', content: 'Hello' }] },
      }),
    );
    return jsonl(headers, 'application/octet-stream', out);
  }
  if (req.method === 'GET' && content) {
    const u = DEFAULT_OPENAI_USAGE;
    const out = Array.from({ length: lines }, (_, i) => {
      const ok = i >= failed;
      return JSON.stringify({
        id: `batch_req_${i}`,
        custom_id: `request-${i}`,
        response: {
          status_code: ok ? 200 : 400,
          request_id: `req_${i}`,
          body: ok
            ? {
                id: `chatcmpl-${i}`,
                object: 'chat.completion',
                created: FAKE_CREATED,
                model: FAKE_BATCH_OPENAI_MODEL,
                choices: [
                  {
                    index: 0,
                    message: { role: 'assistant', content: 'Hello' },
                    logprobs: null,
                    finish_reason: 'stop',
                  },
                ],
                usage: {
                  prompt_tokens: u.prompt_tokens,
                  completion_tokens: u.completion_tokens,
                  total_tokens: u.prompt_tokens + u.completion_tokens,
                  prompt_tokens_details: { cached_tokens: u.cached_tokens, audio_tokens: 0 },
                  completion_tokens_details: { reasoning_tokens: u.reasoning_tokens, audio_tokens: 0 },
                },
              }
            : {
                error: {
                  message: 'Invalid model',
                  type: 'invalid_request_error',
                  param: 'model',
                  code: null,
                },
              },
        },
        error: null,
      });
    });
    for (let i = 0; i < broken; i++) out.push('{"id": "batch_req_broken", "custom_id": ');
    return jsonl(headers, 'application/octet-stream', out);
  }
  return undefined;
}

// ---- Anthropic ----

function anthropicBatch(id: string, over: Record<string, unknown>): Record<string, unknown> {
  return {
    id,
    type: 'message_batch',
    processing_status: 'in_progress',
    request_counts: { processing: 0, succeeded: 0, errored: 0, canceled: 0, expired: 0 },
    ended_at: null,
    created_at: new Date(FAKE_CREATED * 1000).toISOString(),
    expires_at: new Date((FAKE_CREATED + 86_400) * 1000).toISOString(),
    archived_at: null,
    cancel_initiated_at: null,
    results_url: null,
    ...over,
  };
}

/** The usage one succeeded Anthropic batch line reports. */
export function anthropicBatchUsage(webSearches = 0): Record<string, unknown> {
  const u = DEFAULT_ANTHROPIC_USAGE;
  return {
    ...(webSearches > 0
      ? { server_tool_use: { web_search_requests: webSearches, web_fetch_requests: 0 } }
      : {}),
    input_tokens: u.input_tokens,
    cache_creation_input_tokens: u.cache_creation_input_tokens,
    cache_read_input_tokens: u.cache_read_input_tokens,
    cache_creation: {
      ephemeral_5m_input_tokens: u.cache_creation_input_tokens,
      ephemeral_1h_input_tokens: 0,
    },
    output_tokens: u.output_tokens,
    service_tier: 'batch',
  };
}

export function anthropicResultLines(
  n: number,
  failed: number,
  tools: { webSearches: number; container: boolean } = { webSearches: 0, container: false },
): string[] {
  return Array.from({ length: n }, (_, i) =>
    JSON.stringify(
      i < failed
        ? {
            custom_id: `request-${i}`,
            result: {
              type: 'errored',
              error: { type: 'error', error: { type: 'invalid_request_error', message: 'Bad request' } },
            },
          }
        : {
            custom_id: `request-${i}`,
            result: {
              type: 'succeeded',
              message: {
                id: `msg_${i}`,
                type: 'message',
                role: 'assistant',
                model: FAKE_BATCH_ANTHROPIC_MODEL,
                content: [{ type: 'text', text: 'Hello' }],
                stop_reason: 'end_turn',
                stop_sequence: null,
                usage: anthropicBatchUsage(tools.webSearches),
                ...(tools.container
                  ? { container: { id: `container_011batch${i}`, expires_at: '2026-11-27T13:00:00Z' } }
                  : {}),
              },
            },
          },
    ),
  );
}

export function renderAnthropicBatches(
  req: FakeRequest,
  scenario: Scenario,
  headers: Headers,
): RenderedResponse | undefined {
  const path = req.path.split('?')[0] ?? '';
  const { lines, failed, broken, webSearches, container } = shape(scenario);
  if (req.method === 'POST' && path === '/v1/messages/batches') {
    const body = parseJsonBody(req.body) ?? {};
    const n = Array.isArray(body.requests) ? body.requests.length : 0;
    return jsonResponse(
      200,
      headers,
      anthropicBatch(`msgbatch_${deriveId(req, 24)}`, {
        request_counts: { processing: n, succeeded: 0, errored: 0, canceled: 0, expired: 0 },
      }),
    );
  }
  const one = /^\/v1\/messages\/batches\/([^/]+)$/.exec(path);
  if (req.method === 'GET' && one) {
    const id = one[1]!;
    return jsonResponse(
      200,
      headers,
      anthropicBatch(id, {
        processing_status: 'ended',
        ended_at: new Date((FAKE_CREATED + 60) * 1000).toISOString(),
        request_counts: {
          processing: 0,
          succeeded: lines - failed,
          errored: failed,
          canceled: 0,
          expired: 0,
        },
        // Absolute, on the provider's host, as Anthropic sends it.
        results_url: `https://api.anthropic.com/v1/messages/batches/${id}/results`,
      }),
    );
  }
  if (req.method === 'GET' && /^\/v1\/messages\/batches\/[^/]+\/results$/.test(path)) {
    const out = anthropicResultLines(lines, failed, { webSearches, container });
    for (let i = 0; i < broken; i++) out.push('{"custom_id": "request-broken", "result": {');
    return jsonl(headers, 'application/binary', out);
  }
  return undefined;
}
