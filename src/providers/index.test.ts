import { describe, expect, it } from 'vitest';
import { ProxyError } from '../errors.js';
import {
  BUILTIN_PROVIDER_IDS,
  BUILTIN_PROVIDERS,
  endpointOf,
  parseUpstreams,
  providerByRoute,
  providerCredential,
  providerIds,
  providerModule,
  registerUpstreams,
} from './index.js';

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
    for (const id of BUILTIN_PROVIDER_IDS) expect(providerByRoute(BUILTIN_PROVIDERS[id].route)?.id).toBe(id);
    expect(providerByRoute('nowhere')).toBeUndefined();
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
    expect(JSON.parse(BUILTIN_PROVIDERS.openai.errorBody(err))).toEqual({
      error: { message: err.message, type: 'keyrelay_error', code: 'proxy_internal_error' },
    });
    expect(JSON.parse(BUILTIN_PROVIDERS.anthropic.errorBody(err))).toEqual({
      type: 'error',
      error: { type: 'api_error', message: `${err.message} (proxy_internal_error)` },
    });
  });
});

describe('named upstreams', () => {
  registerUpstreams(
    parseUpstreams(
      JSON.stringify({
        'azure-east': { shape: 'openai', origin: 'https://x.openai.azure.com', kind: 'azure' },
        router: { shape: 'openai', origin: 'https://openrouter.ai', kind: 'openrouter' },
        local: { shape: 'openai', origin: 'http://127.0.0.1:11434', streamUsage: false },
        'claude-like': { shape: 'anthropic', origin: 'https://api.example.com' },
      }),
    ),
  );

  it('adds each under its name, after the built-ins, with its shape’s endpoints', () => {
    expect(providerIds()).toEqual(['openai', 'anthropic', 'azure-east', 'router', 'local', 'claude-like']);
    expect(providerByRoute('azure-east')?.id).toBe('azure-east');
    expect(endpointOf('azure-east', '/openai/deployments/gpt4o/chat/completions').class).toBe('chat');
    expect(endpointOf('claude-like', '/v1/messages').class).toBe('messages');
  });

  it('takes Azure’s key from api-key, prices by the kind, and asks streams for usage unless told not to', () => {
    expect(providerCredential('azure-east', { 'api-key': 'az-1' })).toBe('az-1');
    expect(providerModule('azure-east').priceProviderId).toBe('azure');
    expect(providerModule('router').priceProviderId).toBe('openrouter');
    expect(providerModule('local').priceProviderId).toBe('');
    expect(endpointOf('azure-east', '/openai/deployments/d/chat/completions').injectStreamUsage).toBe(true);
    expect(endpointOf('local', '/v1/chat/completions').injectStreamUsage).toBe(false);
    expect(providerModule('router').priceAs?.('anthropic/claude-sonnet-4-5')).toEqual({
      priceProviderId: 'anthropic',
      model: 'claude-sonnet-4-5',
    });
  });

  it.each([
    ['not JSON', '{', /not JSON/],
    [
      'a built-in name',
      '{"openai":{"shape":"openai","origin":"https://a.example"}}',
      /"openai" is a built-in/,
    ],
    ['a bad name', '{"My Azure":{"shape":"openai","origin":"https://a.example"}}', /My Azure: a name is/],
    [
      'a path in the origin',
      '{"a":{"shape":"openai","origin":"https://a.example/v1"}}',
      /a.origin: must be an origin/,
    ],
    ['an unknown shape', '{"a":{"shape":"gemini","origin":"https://a.example"}}', /a.shape/],
    ['an unknown field', '{"a":{"shape":"openai","origin":"https://a.example","key":"sk-1"}}', /a: .*key/],
    [
      'streamUsage on the anthropic shape',
      '{"a":{"shape":"anthropic","origin":"https://a.example","streamUsage":false}}',
      /streamUsage applies/,
    ],
    [
      'azure on the anthropic shape',
      '{"a":{"shape":"anthropic","origin":"https://a.example","kind":"azure"}}',
      /openai shape/,
    ],
  ])('refuses %s', (_, json, message) => {
    expect(() => parseUpstreams(json)).toThrow(message);
  });
});
