import { describe, expect, it } from 'vitest';
import { isSecretName, redactPathQuery, redactValue } from './redact.js';

describe('isSecretName', () => {
  it('knows credential names in any spelling, and leaves ordinary ones', () => {
    for (const n of [
      'apikey',
      'X-ApiKey',
      'api_key',
      'x_api_key',
      'proxy_api_key',
      'Authorization',
      'auth',
      'x-auth-token',
      'password',
      'credentials',
      'x-private_key',
      'set-cookie',
      'x-amz-security-token',
    ])
      expect(isSecretName(n), n).toBe(true);
    for (const n of [
      'content-type',
      'x-ratelimit-remaining-tokens',
      'keep-alive',
      'user-agent',
      'proxy-session',
      'x-request-id',
      'author',
      'monkey',
    ])
      expect(isSecretName(n), n).toBe(false);
  });
});

describe('redactValue', () => {
  it('replaces credential shapes and random tokens, keeps ids, UUIDs, trace ids and prose', () => {
    expect(redactValue('Bearer abcdef0123456789')).toBe('[redacted]');
    expect(redactValue('key sk-ant-api03-abcdefghijklmnop0123 here')).toBe('key [redacted] here');
    expect(redactValue('q8Zr2LwX0pTb7VnKc4YhJm1SdGf6RaEu9Oi3Nl5')).toBe('[redacted]');
    for (const kept of [
      'req_0f3c2a9b8e7d6c5b4a39281706f5e4d3',
      '550e8400-e29b-41d4-a716-446655440000',
      '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
      'OpenAI/Python 1.99.0 (linux; x86_64) async:asyncio',
      'application/json',
    ])
      expect(redactValue(kept), kept).toBe(kept);
  });

  it('redacts query parameters by name and by value, keeping the path and the rest', () => {
    expect(redactPathQuery('/v1/models?key=abc&limit=5&x=sk-proj-abcdefghijklmnop0123')).toBe(
      '/v1/models?key=[redacted]&limit=5&x=[redacted]',
    );
    expect(redactPathQuery('/v1/models')).toBe('/v1/models');
  });
});
