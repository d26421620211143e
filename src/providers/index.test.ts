import { describe, expect, it } from 'vitest';
import { ProxyError } from '../errors.js';
import { endpointOf, PROVIDER_IDS, PROVIDERS, providerByRoute, providerCredential } from './index.js';

describe('endpoint table', () => {
  it.each([
    ['openai', '/v1/chat/completions', 'chat', true],
    ['openai', '/v1/chat/completions/', 'chat', true],
    ['openai', '/openai/deployments/x/chat/completions', 'chat', true],
    ['openai', '/v1/completions', 'completions', true],
    ['openai', '/v1/responses', 'responses', true],
    ['openai', '/v1/embeddings', 'embeddings', true],
    ['openai', '/v1/responses/resp_1', 'other', false],
    ['openai', '/v1/audio/transcriptions', 'audio_transcription', true],
    ['openai', '/v1/audio/translations', 'audio_translation', true],
    ['openai', '/v1/audio/speech', 'audio_speech', true],
    ['openai', '/v1/images/generations', 'images', true],
    ['openai', '/v1/images/edits', 'images', true],
    ['openai', '/v1/moderations', 'moderations', false],
    ['openai', '/v1/batches/batch_1/cancel', 'batches', false],
    ['openai', '/v1/files/file-1/content', 'files', false],
    ['openai', '/v1/models/gpt-4o', 'models', false],
    ['openai', '/v1/realtime', 'realtime', false],
    ['anthropic', '/v1/messages', 'messages', true],
    ['anthropic', '/v1/complete', 'complete', true],
    ['anthropic', '/v1/messages/count_tokens', 'count_tokens', false],
    ['anthropic', '/v1/messages/batches/msgbatch_1/results', 'batches', false],
    ['anthropic', '/v1/models', 'models', false],
    ['anthropic', '/v1/chat/completions', 'other', false],
  ] as const)('%s %s is %s', (provider, path, cls, readsUsage) => {
    const e = endpointOf(provider, path);
    expect(e.class).toBe(cls);
    expect(e.usage !== null).toBe(readsUsage);
  });

  it('asks for stream usage on OpenAI chat completions only', () => {
    expect(endpointOf('openai', '/v1/chat/completions').injectStreamUsage).toBe(true);
    expect(endpointOf('openai', '/v1/responses').injectStreamUsage).toBe(false);
    expect(endpointOf('anthropic', '/v1/messages').injectStreamUsage).toBe(false);
  });
});

describe('registry', () => {
  it('finds every provider by its route segment, and nothing else', () => {
    for (const id of PROVIDER_IDS) expect(providerByRoute(PROVIDERS[id].route)?.id).toBe(id);
    expect(providerByRoute('azure')).toBeUndefined();
    expect(providerByRoute('__proto__')).toBeUndefined();
  });

  it('reads the credential from the provider’s headers, x-api-key first, without Bearer', () => {
    expect(providerCredential('openai', { authorization: 'Bearer sk-a' })).toBe('sk-a');
    expect(providerCredential('anthropic', { 'x-api-key': 'sk-ant-b', authorization: 'Bearer c' })).toBe(
      'sk-ant-b',
    );
    expect(providerCredential('anthropic', {})).toBeNull();
  });

  it('renders keyrelay errors in each provider’s shape', () => {
    const err = new ProxyError('proxy_internal_error');
    expect(JSON.parse(PROVIDERS.openai.errorBody(err))).toEqual({
      error: { message: err.message, type: 'keyrelay_error', code: 'proxy_internal_error' },
    });
    expect(JSON.parse(PROVIDERS.anthropic.errorBody(err))).toEqual({
      type: 'error',
      error: { type: 'api_error', message: `${err.message} (proxy_internal_error)` },
    });
  });
});
