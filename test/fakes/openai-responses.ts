import type { FakeOpenAIUsage } from './openai.js';
import {
  FAKE_CREATED,
  deriveId,
  jsonResponse,
  sseResponse,
  textDeltas,
  type FakeRequest,
  type Headers,
  type RenderedResponse,
} from './render.js';
import { runOpenAIHostedTools } from './server-tools.js';

function responsesUsage(u: FakeOpenAIUsage): Record<string, unknown> {
  return {
    input_tokens: u.prompt_tokens,
    input_tokens_details: { cached_tokens: u.cached_tokens },
    output_tokens: u.completion_tokens,
    output_tokens_details: { reasoning_tokens: u.reasoning_tokens },
    total_tokens: u.prompt_tokens + u.completion_tokens,
  };
}

const namedSse = (value: { type: string; [k: string]: unknown }): string =>
  `event: ${value.type}\ndata: ${JSON.stringify(value)}\n\n`;

/** OpenAI `/v1/responses`: JSON, or SSE events ending in `response.completed` with usage. */
export function renderResponses(
  req: FakeRequest,
  body: Record<string, unknown>,
  usage: FakeOpenAIUsage,
  n: number,
  headers: Headers,
  toolCalls = 1,
): RenderedResponse {
  const model = typeof body.model === 'string' ? body.model : 'gpt-4o-mini';
  const id = `resp_${deriveId(req, 32)}`;
  const itemId = `msg_${deriveId(req, 32)}`;
  const deltas = textDeltas(n);
  const text = deltas.join('');
  const part = { type: 'output_text', annotations: [], logprobs: [], text };
  const item = { id: itemId, type: 'message', status: 'completed', content: [part], role: 'assistant' };
  const toolItems = runOpenAIHostedTools(body.tools, toolCalls, deriveId(req, 12));
  const at = toolItems.length; // the message's output_index
  const response = (status: string, output: unknown[], u: unknown): Record<string, unknown> => ({
    id,
    object: 'response',
    created_at: FAKE_CREATED,
    status,
    error: null,
    incomplete_details: null,
    instructions: null,
    max_output_tokens: null,
    model,
    output,
    parallel_tool_calls: true,
    previous_response_id: null,
    reasoning: { effort: null, summary: null },
    store: true,
    temperature: 1,
    text: { format: { type: 'text' } },
    tool_choice: 'auto',
    tools: [],
    top_p: 1,
    truncation: 'disabled',
    usage: u,
    user: null,
    metadata: {},
  });
  if (body.stream !== true)
    return jsonResponse(200, headers, response('completed', [...toolItems, item], responsesUsage(usage)));
  const events: { type: string; [k: string]: unknown }[] = [
    { type: 'response.created', response: response('in_progress', [], null) },
    { type: 'response.in_progress', response: response('in_progress', [], null) },
    ...toolItems.flatMap((tool, i) => [
      { type: 'response.output_item.added', output_index: i, item: { ...tool, status: 'in_progress' } },
      { type: 'response.output_item.done', output_index: i, item: tool },
    ]),
    {
      type: 'response.output_item.added',
      output_index: at,
      item: { ...item, status: 'in_progress', content: [] },
    },
    {
      type: 'response.content_part.added',
      item_id: itemId,
      output_index: at,
      content_index: 0,
      part: { ...part, text: '' },
    },
    ...deltas.map((delta) => ({
      type: 'response.output_text.delta',
      item_id: itemId,
      output_index: at,
      content_index: 0,
      delta,
      logprobs: [],
    })),
    {
      type: 'response.output_text.done',
      item_id: itemId,
      output_index: at,
      content_index: 0,
      text,
      logprobs: [],
    },
    { type: 'response.content_part.done', item_id: itemId, output_index: at, content_index: 0, part },
    { type: 'response.output_item.done', output_index: at, item },
    { type: 'response.completed', response: response('completed', [item], responsesUsage(usage)) },
  ];
  return sseResponse(
    headers,
    events.map((e, i) => namedSse({ ...e, sequence_number: i })),
  );
}
