import { describe, expect, it } from 'vitest';
import { requestChat, responseChat } from './chat.js';

const sse = (events: unknown[], named = false) =>
  events
    .map((e) => `${named ? `event: ${(e as { type: string }).type}\n` : ''}data: ${JSON.stringify(e)}\n\n`)
    .join('') + (named ? '' : 'data: [DONE]\n\n');

describe('requestChat', () => {
  it('reads an OpenAI chat request with an image, a tool call and its result', () => {
    const chat = requestChat(
      JSON.stringify({
        model: 'gpt-5-mini',
        messages: [
          { role: 'system', content: 'Be brief.' },
          {
            role: 'user',
            content: [
              { type: 'text', text: 'What is in this picture?' },
              { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } },
            ],
          },
          {
            role: 'assistant',
            content: null,
            tool_calls: [
              { id: 'call_1', type: 'function', function: { name: 'lookup', arguments: '{"q":"cat"}' } },
            ],
          },
          { role: 'tool', tool_call_id: 'call_1', content: 'a cat' },
        ],
      }),
    );
    expect(chat).toEqual([
      { role: 'system', parts: [{ type: 'text', text: 'Be brief.' }] },
      {
        role: 'user',
        parts: [
          { type: 'text', text: 'What is in this picture?' },
          { type: 'image', label: 'image' },
        ],
      },
      {
        role: 'assistant',
        parts: [{ type: 'tool_call', name: 'lookup', id: 'call_1', args: '{"q":"cat"}' }],
      },
      { role: 'tool', parts: [{ type: 'tool_result', id: 'call_1', text: 'a cat' }] },
    ]);
  });

  it('reads an Anthropic messages request with system, tool_use and tool_result blocks', () => {
    const chat = requestChat(
      JSON.stringify({
        system: [{ type: 'text', text: 'You are terse.' }],
        messages: [
          { role: 'user', content: 'Weather?' },
          {
            role: 'assistant',
            content: [{ type: 'tool_use', id: 'tu_1', name: 'weather', input: { city: 'Oslo' } }],
          },
          {
            role: 'user',
            content: [
              { type: 'tool_result', tool_use_id: 'tu_1', content: [{ type: 'text', text: '3°C' }] },
              { type: 'image', source: { type: 'base64', data: 'AAAA' } },
            ],
          },
        ],
      }),
    );
    expect(chat).toEqual([
      { role: 'system', parts: [{ type: 'text', text: 'You are terse.' }] },
      { role: 'user', parts: [{ type: 'text', text: 'Weather?' }] },
      {
        role: 'assistant',
        parts: [{ type: 'tool_call', name: 'weather', id: 'tu_1', args: '{"city":"Oslo"}' }],
      },
      {
        role: 'user',
        parts: [
          { type: 'tool_result', id: 'tu_1', text: '3°C' },
          { type: 'image', label: 'image' },
        ],
      },
    ]);
  });

  it('reads an OpenAI responses request (instructions, input items, function call output)', () => {
    const chat = requestChat(
      JSON.stringify({
        instructions: 'Answer in French.',
        input: [
          {
            role: 'user',
            content: [
              { type: 'input_text', text: 'Hi' },
              { type: 'input_image', image_url: 'x' },
            ],
          },
          { type: 'function_call', name: 'f', call_id: 'c1', arguments: '{}' },
          { type: 'function_call_output', call_id: 'c1', output: 'done' },
        ],
      }),
    );
    expect(chat).toEqual([
      { role: 'system', parts: [{ type: 'text', text: 'Answer in French.' }] },
      {
        role: 'user',
        parts: [
          { type: 'text', text: 'Hi' },
          { type: 'image', label: 'image' },
        ],
      },
      { role: 'assistant', parts: [{ type: 'tool_call', name: 'f', id: 'c1', args: '{}' }] },
      { role: 'tool', parts: [{ type: 'tool_result', id: 'c1', text: 'done' }] },
    ]);
    expect(requestChat(JSON.stringify({ input: 'plain' }))).toEqual([
      { role: 'user', parts: [{ type: 'text', text: 'plain' }] },
    ]);
  });

  it('gives up (null) on what is not a conversation', () => {
    expect(requestChat(null)).toBeNull();
    expect(requestChat('not json')).toBeNull();
    expect(requestChat(JSON.stringify({ input: 3, model: 'text-embedding-3-small' }))).toBeNull();
  });
});

describe('responseChat', () => {
  it('reads JSON answers of all three APIs', () => {
    expect(
      responseChat(
        JSON.stringify({ choices: [{ message: { role: 'assistant', content: 'Hello' } }] }),
        false,
      ),
    ).toEqual([{ role: 'assistant', parts: [{ type: 'text', text: 'Hello' }] }]);
    expect(
      responseChat(
        JSON.stringify({
          type: 'message',
          role: 'assistant',
          content: [
            { type: 'thinking', thinking: 'hmm' },
            { type: 'text', text: 'Hi' },
          ],
        }),
        false,
      ),
    ).toEqual([
      {
        role: 'assistant',
        parts: [
          { type: 'thinking', text: 'hmm' },
          { type: 'text', text: 'Hi' },
        ],
      },
    ]);
    expect(
      responseChat(
        JSON.stringify({
          output: [{ type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Yo' }] }],
        }),
        false,
      ),
    ).toEqual([{ role: 'assistant', parts: [{ type: 'text', text: 'Yo' }] }]);
  });

  it('reassembles an OpenAI chat stream with text and a tool call split over chunks', () => {
    const body = sse([
      { choices: [{ delta: { role: 'assistant', content: 'Hel' } }] },
      { choices: [{ delta: { content: 'lo' } }] },
      {
        choices: [
          { delta: { tool_calls: [{ index: 0, id: 'c9', function: { name: 'get', arguments: '{"a"' } }] } },
        ],
      },
      { choices: [{ delta: { tool_calls: [{ index: 0, function: { arguments: ':1}' } }] } }] },
      { choices: [], usage: { prompt_tokens: 1 } },
    ]);
    expect(responseChat(body, true)).toEqual([
      {
        role: 'assistant',
        parts: [
          { type: 'text', text: 'Hello' },
          { type: 'tool_call', name: 'get', id: 'c9', args: '{"a":1}' },
        ],
      },
    ]);
  });

  it('reassembles an Anthropic stream with text and tool input JSON', () => {
    const body = sse(
      [
        { type: 'message_start', message: { role: 'assistant', content: [] } },
        { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
        { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Let me check.' } },
        {
          type: 'content_block_start',
          index: 1,
          content_block: { type: 'tool_use', id: 't1', name: 'w', input: {} },
        },
        {
          type: 'content_block_delta',
          index: 1,
          delta: { type: 'input_json_delta', partial_json: '{"city":' },
        },
        {
          type: 'content_block_delta',
          index: 1,
          delta: { type: 'input_json_delta', partial_json: '"Oslo"}' },
        },
        { type: 'message_stop' },
      ],
      true,
    );
    expect(responseChat(body, true)).toEqual([
      {
        role: 'assistant',
        parts: [
          { type: 'text', text: 'Let me check.' },
          { type: 'tool_call', name: 'w', id: 't1', args: '{"city":"Oslo"}' },
        ],
      },
    ]);
  });

  it('reads an OpenAI responses stream from response.completed', () => {
    const body = sse(
      [
        { type: 'response.output_text.delta', delta: 'Hi' },
        {
          type: 'response.completed',
          response: {
            output: [{ type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Hi' }] }],
          },
        },
      ],
      true,
    );
    expect(responseChat(body, true)).toEqual([{ role: 'assistant', parts: [{ type: 'text', text: 'Hi' }] }]);
  });
});
