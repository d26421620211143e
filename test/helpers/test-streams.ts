/** Provider-shaped response bodies for the usage layer's tests (SSE text as the real APIs emit it). */

const sse = (value: unknown, event?: string): string =>
  `${event ? `event: ${event}\n` : ''}data: ${JSON.stringify(value)}\n\n`;

export const DELTAS = ['Hél', 'lo, ', '世界', ' 🎉', ' done'];

export interface OpenAIChatStreamOptions {
  includeUsage: boolean;
  usage?: Record<string, unknown>;
  deltas?: string[];
}

export const OPENAI_USAGE = {
  prompt_tokens: 120,
  completion_tokens: 30,
  total_tokens: 150,
  prompt_tokens_details: { cached_tokens: 64, audio_tokens: 0 },
  completion_tokens_details: { reasoning_tokens: 12, audio_tokens: 0 },
};

/** What OpenAI sends for a streaming chat completion, with or without stream_options.include_usage. */
export function openAIChatStream(opts: OpenAIChatStreamOptions): string {
  const base = {
    id: 'chatcmpl-1',
    object: 'chat.completion.chunk',
    created: 1,
    model: 'gpt-4o-mini-2024-07-18',
  };
  const chunk = (choices: unknown[], usage: unknown = null) =>
    sse({
      ...base,
      service_tier: 'default',
      system_fingerprint: 'fp_1',
      choices,
      ...(opts.includeUsage ? { usage } : {}),
    });
  const choice = (delta: unknown, finish: string | null) => ({
    index: 0,
    delta,
    logprobs: null,
    finish_reason: finish,
  });
  const parts = [
    chunk([choice({ role: 'assistant', content: '', refusal: null }, null)]),
    ...(opts.deltas ?? DELTAS).map((t) => chunk([choice({ content: t }, null)])),
    chunk([choice({}, 'stop')]),
  ];
  if (opts.includeUsage) parts.push(chunk([], opts.usage ?? OPENAI_USAGE));
  parts.push('data: [DONE]\n\n');
  return parts.join('');
}

/** Anthropic messages stream: message_start, content blocks, cumulative message_delta, message_stop. */
export function anthropicStream(): string {
  return [
    sse(
      {
        type: 'message_start',
        message: {
          id: 'msg_1',
          type: 'message',
          role: 'assistant',
          model: 'claude-sonnet-4-20250514',
          content: [],
          stop_reason: null,
          usage: {
            input_tokens: 25,
            cache_creation_input_tokens: 5,
            cache_read_input_tokens: 100,
            output_tokens: 1,
          },
        },
      },
      'message_start',
    ),
    sse(
      { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
      'content_block_start',
    ),
    sse({ type: 'ping' }, 'ping'),
    ...DELTAS.map((t) =>
      sse(
        { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: t } },
        'content_block_delta',
      ),
    ),
    sse({ type: 'content_block_stop', index: 0 }, 'content_block_stop'),
    sse(
      {
        type: 'message_delta',
        delta: { stop_reason: 'end_turn', stop_sequence: null },
        usage: {
          input_tokens: 25,
          cache_creation_input_tokens: 5,
          cache_read_input_tokens: 100,
          output_tokens: 42,
        },
      },
      'message_delta',
    ),
    sse({ type: 'message_stop' }, 'message_stop'),
  ].join('');
}

/** OpenAI Responses API stream ending in response.completed. */
export function openAIResponsesStream(): string {
  const response = {
    id: 'resp_1',
    object: 'response',
    model: 'gpt-4o-2024-08-06',
    status: 'in_progress',
    usage: null,
  };
  return [
    sse({ type: 'response.created', sequence_number: 0, response }, 'response.created'),
    ...DELTAS.map((t, i) =>
      sse(
        { type: 'response.output_text.delta', sequence_number: i + 1, item_id: 'msg_1', delta: t },
        'response.output_text.delta',
      ),
    ),
    sse(
      {
        type: 'response.completed',
        sequence_number: 99,
        response: {
          ...response,
          status: 'completed',
          output: [{ type: 'message', content: [{ type: 'output_text', text: DELTAS.join('') }] }],
          usage: {
            input_tokens: 300,
            input_tokens_details: { cached_tokens: 256 },
            output_tokens: 50,
            output_tokens_details: { reasoning_tokens: 20 },
            total_tokens: 350,
          },
        },
      },
      'response.completed',
    ),
  ].join('');
}
