import { describe, expect, it } from 'vitest';
import { entropy, isSecretName, redactPathQuery, redactValue } from './redact.js';

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

describe('entropy', () => {
  /** The plain definition: a Map of counts, summed in the order the symbols first appear. */
  function reference(s: string): number {
    const counts = new Map<string, number>();
    for (const ch of s) counts.set(ch, (counts.get(ch) ?? 0) + 1);
    let bits = 0;
    for (const n of counts.values()) {
      const p = n / s.length;
      bits -= p * Math.log2(p);
    }
    return bits;
  }

  it('is the same number as the plain definition, run after run (its table is reused)', () => {
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_-';
    let seed = 7;
    for (let i = 0; i < 500; i++) {
      let run = '';
      const width = 2 + (i % alphabet.length);
      for (let j = 0; j < 32 + (i % 40); j++) {
        seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
        run += alphabet[seed % width];
      }
      expect(entropy(run)).toBe(reference(run));
    }
  });

  it('answers isSecretName the same once a name is remembered, past the bound too', () => {
    for (let i = 0; i < 3000; i++) expect(isSecretName(`x-name-${i}`)).toBe(false);
    expect(isSecretName('x-api-key')).toBe(true);
    expect(isSecretName('x-api-key')).toBe(true);
    expect(isSecretName('content-type')).toBe(false);
  });
});
