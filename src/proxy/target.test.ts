import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { resolveTarget } from './target.js';

const refused = [
  '/api/proxy/openai//evil.example/v1',
  '/api/proxy/openai/\\evil.example',
  '/api/proxy/openai/v1/../../admin',
  '/api/proxy/openai/v1/./models',
  '/api/proxy/openai/v1/%2e%2e/x',
  '/api/proxy/openai/v1/%2E%2E/x',
  '/api/proxy/openai/v1/.%2E/x',
  '/api/proxy/openai/v1/%2e/x',
  '/api/proxy/openai/v1/%252e%252e/x',
  '/api/proxy/openai/v1/%25252e%25252e/x',
  '/api/proxy/openai/v1%2fmodels',
  '/api/proxy/openai/v1%2Fmodels',
  '/api/proxy/openai/v1%5cmodels',
  '/api/proxy/openai/v1%255cmodels',
  '/api/proxy/openai/v1/%00',
  '/api/proxy/openai/v1/models%0d%0aHost:%20evil',
  '/api/proxy/openai/v1/models?x=%0d%0a',
  '/api/proxy/openai/v1/models#frag',
  '/api/proxy/openai/v1/%zz',
  'http://evil.example/api/proxy/openai/v1/models',
  '//evil.example/api/proxy/openai/v1/models',
  '*',
  '/api/proxy/openai/v1//models',
  '/api/proxy/anthropic/..',
];

describe('resolveTarget', () => {
  it.each(refused)('refuses %s', (url) => {
    const r = resolveTarget(url);
    expect(r.ok).toBe(false);
  });

  it('keeps path and query of ordinary requests exactly', () => {
    expect(resolveTarget('/api/proxy/openai/v1/chat/completions')).toEqual({
      ok: true,
      provider: 'openai',
      path: '/v1/chat/completions',
      query: '',
    });
    expect(resolveTarget('/api/proxy/anthropic/v1/models?limit=20&after_id=a%20b')).toEqual({
      ok: true,
      provider: 'anthropic',
      path: '/v1/models',
      query: '?limit=20&after_id=a%20b',
    });
    expect(resolveTarget('/api/proxy/openai/v1/files/file-abc%40x/content')).toMatchObject({ ok: true });
    expect(resolveTarget('/api/proxy/anthropic')).toMatchObject({ ok: true, path: '/' });
  });

  it('names an unknown provider as such', () => {
    expect(resolveTarget('/api/proxy/gemini/v1/models')).toMatchObject({
      ok: false,
      reason: 'unknown_provider',
    });
  });

  it('never yields a path that a URL parser would resolve outside the prefix or to another origin', () => {
    const segment = fc.oneof(
      fc.constantFrom(
        '.',
        '..',
        '%2e',
        '%2E%2e',
        '%252e',
        '%2f',
        '%5c',
        '\\',
        '',
        'v1',
        'models',
        '%00',
        '%',
        '@',
        ':',
      ),
      fc.string({ maxLength: 6 }),
    );
    fc.assert(
      fc.property(
        fc.array(segment, { maxLength: 6 }),
        fc.constantFrom('openai', 'anthropic'),
        (segs, provider) => {
          const url = `/api/proxy/${provider}/${segs.join('/')}`;
          const r = resolveTarget(url);
          if (!r.ok) return;
          const origin = 'https://api.example.com';
          // What an upstream (or any intermediary) that decodes and normalises would make of it.
          let decoded = r.path;
          for (let i = 0; i < 4; i++) decoded = decodeURIComponent(decoded);
          const resolved = new URL(origin + r.path);
          expect(resolved.origin).toBe(origin);
          expect(decoded.split('/')).not.toContain('..');
          expect(decoded.split('/')).not.toContain('.');
          expect(decoded).not.toMatch(/\\|[\u0000-\u001f]/);
          // No segment was swallowed or added by dot-segment removal.
          expect(resolved.pathname.split('/').length).toBe(r.path.split('/').length);
        },
      ),
      { numRuns: 2000 },
    );
  });
});
