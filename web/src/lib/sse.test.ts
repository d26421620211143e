import { describe, expect, it } from 'vitest';
import { looksLikeSse, parseSse, prettyBody, reassembleSse } from './sse.js';

const openaiStream = [
  '{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}',
  '{"choices":[{"index":0,"delta":{"content":"Hel"}}]}',
  '{"choices":[{"index":0,"delta":{"content":"lo!"}}]}',
  '{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}',
  '[DONE]',
]
  .map((d) => `data: ${d}\n\n`)
  .join('');

const anthropicStream = [
  ['message_start', '{"type":"message_start","message":{"usage":{"input_tokens":5}}}'],
  [
    'content_block_start',
    '{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}',
  ],
  [
    'content_block_delta',
    '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi "}}',
  ],
  ['ping', '{"type":"ping"}'],
  [
    'content_block_delta',
    '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"there"}}',
  ],
  ['content_block_stop', '{"type":"content_block_stop","index":0}'],
  ['message_stop', '{"type":"message_stop"}'],
]
  .map(([e, d]) => `event: ${e}\r\ndata: ${d}\r\n\r\n`)
  .join('');

describe('reassembleSse', () => {
  it('concatenates OpenAI delta content and skips [DONE] and the usage chunk', () => {
    expect(reassembleSse(parseSse(openaiStream))).toBe('Hello!');
  });

  it('concatenates Anthropic text deltas across CRLF-framed events', () => {
    const events = parseSse(anthropicStream);
    expect(events[0]).toEqual({
      event: 'message_start',
      data: expect.stringContaining('message_start') as string,
    });
    expect(reassembleSse(events)).toBe('Hi there');
  });

  it('returns null for a stream without any text', () => {
    expect(reassembleSse(parseSse('event: error\ndata: {"type":"error"}\n\n'))).toBeNull();
  });

  it('joins multi-line data fields with newlines', () => {
    expect(parseSse('data: a\ndata: b\n\n')).toEqual([{ event: null, data: 'a\nb' }]);
  });
});

describe('looksLikeSse / prettyBody', () => {
  it('tells SSE from JSON by content type or by shape', () => {
    expect(looksLikeSse('{"a":1}', 'text/event-stream; charset=utf-8')).toBe(true);
    expect(looksLikeSse(openaiStream)).toBe(true);
    expect(looksLikeSse('{"data": 1}')).toBe(false);
  });

  it('pretty-prints JSON and leaves truncated JSON as it is', () => {
    expect(prettyBody('{"a":1}')).toEqual({ text: '{\n  "a": 1\n}', json: true });
    expect(prettyBody('{"a":')).toEqual({ text: '{"a":', json: false });
  });
});
