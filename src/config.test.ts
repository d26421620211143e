import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from './config.js';

describe('loadConfig', () => {
  it('gives the documented defaults', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      host: '127.0.0.1',
      port: 8080,
      publicUrl: 'http://127.0.0.1:8080',
      upstreams: { openai: 'https://api.openai.com', anthropic: 'https://api.anthropic.com' },
      dataDir: './data',
      databaseUrl: null,
      redisUrl: null,
      signup: 'open',
      bodyLogBytes: 65536,
      maxBodyBytes: 33554432,
      secureCookies: false,
    });
    expect(Object.isFrozen(c)).toBe(true);
  });

  it.each([
    ['KEYRELAY_PORT', '99999'],
    ['KEYRELAY_PORT', 'http'],
    ['KEYRELAY_SIGNUP', 'sometimes'],
    ['KEYRELAY_OPENAI_UPSTREAM', 'ftp://x'],
    ['KEYRELAY_ANTHROPIC_UPSTREAM', 'https://api.anthropic.com/v1'],
    ['KEYRELAY_DATABASE_URL', 'mysql://x'],
    ['KEYRELAY_BODY_LOG_BYTES', '-1'],
    ['KEYRELAY_REQUEST_LOG', 'maybe'],
    ['KEYRELAY_HARD_BUDGET_UNPRICED', 'sometimes'],
    ['KEYRELAY_LIMIT_HOLD_TTL_MS', '10'],
    ['KEYRELAY_BUDGET_DEFAULT_OUTPUT_TOKENS', '-5'],
    ['KEYRELAY_LOG_SEARCH', 'sometimes'],
    ['KEYRELAY_LOG_SEARCH_BODY_CHARS', '-1'],
    ['KEYRELAY_LOG_SEARCH_SCAN_ROWS', '0'],
    ['KEYRELAY_LOGIN_MAX_PER_IP', '0'],
    ['KEYRELAY_LOGIN_WINDOW_MINUTES', 'soon'],
    ['KEYRELAY_LOG_WRITER_IDLE_MS', '5'],
    ['KEYRELAY_LOG_READER_IDLE_MS', '5'],
    ['KEYRELAY_SQLITE_CACHE_MB', '0'],
    ['KEYRELAY_LOG_BATCH_BODY_CHARS', '0'],
    ['KEYRELAY_LOG_QUEUE_MAX_BODY_CHARS', '-1'],
    ['KEYRELAY_UPSTREAM_KEEPALIVE_MS', '0'],
  ])('refuses %s=%s with a message naming it', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
    expect(() => loadConfig({ [name]: value })).toThrow(name);
  });

  it('gives hard budgets their defaults: 4096 output tokens, unpriced calls refused, holds lapse after 60 s', () => {
    expect(loadConfig({}).limits).toEqual({
      defaultOutputTokens: 4096,
      unpriced: 'refuse',
      holdTtlMs: 60_000,
    });
    expect(
      loadConfig({ KEYRELAY_HARD_BUDGET_UNPRICED: 'allow', KEYRELAY_BUDGET_DEFAULT_OUTPUT_TOKENS: '0' })
        .limits,
    ).toMatchObject({ unpriced: 'allow', defaultOutputTokens: 0 });
  });

  it('keeps the request log searchable by default, and reads the search settings', () => {
    expect(loadConfig({}).logSearch).toEqual({ enabled: true, bodyChars: 8192, scanRows: 10_000 });
    expect(
      loadConfig({
        KEYRELAY_LOG_SEARCH: 'false',
        KEYRELAY_LOG_SEARCH_BODY_CHARS: '0',
        KEYRELAY_LOG_SEARCH_SCAN_ROWS: '500',
      }).logSearch,
    ).toEqual({ enabled: false, bodyChars: 0, scanRows: 500 });
  });

  it('lets flags override the environment and derives secure cookies from an https public URL', () => {
    const c = loadConfig(
      { KEYRELAY_PORT: '1' },
      { KEYRELAY_PORT: '9000', KEYRELAY_PUBLIC_URL: 'https://relay.example.com/' },
    );
    expect(c.port).toBe(9000);
    expect(c.publicUrl).toBe('https://relay.example.com');
    expect(c.secureCookies).toBe(true);
  });
});
