import { describe, expect, it } from 'vitest';
import { computeCost } from '../metering/index.js';
import { countTextTokens } from '../usage/index.js';
import { isRpmExempt, outputAllowance, promptTokens, requestBound, requestClass } from './bound.js';

const usage = (input: number, output: number) => ({
  input_tokens: input,
  output_tokens: output,
  cache_read_tokens: null,
  cache_write_tokens: null,
  reasoning_tokens: null,
  source: 'provider' as const,
  model: null,
});

describe('requestClass and the rpm exemptions', () => {
  it('sorts calls into free, token-billed and unpriced', () => {
    expect(requestClass('openai', 'GET', '/v1/models')).toBe('free');
    expect(requestClass('openai', 'DELETE', '/v1/files/f1')).toBe('free');
    expect(requestClass('anthropic', 'POST', '/v1/messages/count_tokens')).toBe('free');
    expect(requestClass('openai', 'POST', '/v1/responses/input_tokens')).toBe('free');
    expect(requestClass('openai', 'POST', '/v1/batches/b1/cancel')).toBe('free');
    expect(requestClass('openai', 'POST', '/v1/moderations')).toBe('free');
    expect(requestClass('openai', 'POST', '/v1/chat/completions')).toBe('tokens');
    expect(requestClass('anthropic', 'POST', '/v1/messages')).toBe('tokens');
    expect(requestClass('openai', 'POST', '/v1/audio/speech')).toBe('unpriced');
    expect(requestClass('openai', 'POST', '/v1/batches')).toBe('unpriced');
  });

  it('leaves listings, retrievals and token counting out of a billable rpm', () => {
    expect(isRpmExempt('GET', '/v1/models')).toBe(true);
    expect(isRpmExempt('POST', '/v1/messages/count_tokens')).toBe(true);
    expect(isRpmExempt('POST', '/v1/chat/completions')).toBe(false);
    expect(isRpmExempt('DELETE', '/v1/files/f1')).toBe(false);
  });
});

describe('requestBound', () => {
  it('takes the largest output maximum, times n choices, or the default', () => {
    expect(outputAllowance({ max_tokens: 100 })).toBe(100);
    expect(outputAllowance({ max_completion_tokens: 300, max_tokens: 100 })).toBe(300);
    expect(outputAllowance({ max_output_tokens: 50, n: 3 })).toBe(150);
    expect(outputAllowance({ model: 'x' })).toBeNull();
    expect(outputAllowance({ max_tokens: 'lots' })).toBeNull();
  });

  it('prices prompt and output at the library’s rates; an unknown model has no price', () => {
    const json = {
      model: 'gpt-4o',
      messages: [{ role: 'user', content: 'Hello there, relay.' }],
      max_tokens: 1000,
    };
    const input = promptTokens(json);
    // Three request tokens, four per message, the text, one separator per string.
    expect(input).toBe(3 + 4 + countTextTokens('Hello there, relay.') + 1);
    const b = requestBound('openai', '/v1/chat/completions', 'gpt-4o', json, 4096);
    expect(b.tokens).toBe(input + 1000);
    const expected = computeCost('openai', 'gpt-4o', usage(input, 1000)).cost_usd!;
    expect(b.nanos! / 1e9).toBeCloseTo(expected, 9);
    expect(requestBound('openai', '/v1/chat/completions', 'no-such-model', json, 4096).nanos).toBeNull();
    // No maximum: the default allowance; embeddings generate nothing.
    expect(requestBound('openai', '/v1/chat/completions', 'gpt-4o', { messages: [] }, 4096).tokens).toBe(
      4096 + 3,
    );
    expect(
      requestBound('openai', '/v1/embeddings', 'text-embedding-3-small', { input: [1, 2, 3] }, 4096),
    ).toMatchObject({
      tokens: 3,
    });
  });

  it('counts a repeated prompt string the same from the cache', () => {
    const json = {
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Be brief.' },
      ],
    };
    expect(promptTokens(json)).toBe(3 + 8 + 2 * (countTextTokens('Be brief.') + 1));
    expect(promptTokens(json)).toBe(promptTokens(json));
  });

  it('counts in bytes never fewer than in tokens, whatever the script', () => {
    const texts = [
      'Hello there, relay.',
      'Übergrößenträger mögen Äpfel, Öl und Süßes.',
      '反向代理在API前面做什么？它转发请求并记录用量。',
      'Emoji 🚀🔥👩‍👩‍👧‍👦 and math ∑∫√ and code `const x = () => 1;`',
      'a'.repeat(5000),
    ];
    for (const content of texts) {
      const json = { messages: [{ role: 'user', content }], tools: [{ name: 't', description: content }] };
      const bytes = promptTokens(json, (t) => Buffer.byteLength(t));
      expect(bytes).toBeGreaterThanOrEqual(promptTokens(json));
      expect(requestBound('openai', '/v1/chat/completions', 'gpt-4o', json, 0, 'bytes').tokens).toBe(bytes);
    }
  });
});
