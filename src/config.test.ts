import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, mallocVariables, unknownVariables } from './config.js';

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
    ['KEYRELAY_LOG_SEARCH', 'sometimes'],
    ['KEYRELAY_CLIENT_REQUEST_TIMEOUT_MS', '0'],
    ['KEYRELAY_WS_MAX_MESSAGE_BYTES', '0'],
  ])('refuses %s=%s with a message naming it', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
    expect(() => loadConfig({ [name]: value })).toThrow(name);
  });

  it('adds named upstreams from KEYRELAY_UPSTREAMS, as JSON or as the path of a JSON file', () => {
    const json = JSON.stringify({
      azure: { shape: 'openai', origin: 'https://x.openai.azure.com/', kind: 'azure' },
      local: { shape: 'openai', origin: 'http://127.0.0.1:8000', streamUsage: false },
    });
    const c = loadConfig({ KEYRELAY_UPSTREAMS: json });
    expect(c.upstreams).toEqual({
      openai: 'https://api.openai.com',
      anthropic: 'https://api.anthropic.com',
      azure: 'https://x.openai.azure.com',
      local: 'http://127.0.0.1:8000',
    });
    expect(c.namedUpstreams.map((u) => u.name)).toEqual(['azure', 'local']);
    const dir = mkdtempSync(join(tmpdir(), 'keyrelay-upstreams-'));
    try {
      const file = join(dir, 'upstreams.json');
      writeFileSync(file, json);
      expect(loadConfig({ KEYRELAY_UPSTREAMS: file }).upstreams).toEqual(c.upstreams);
      expect(() => loadConfig({ KEYRELAY_UPSTREAMS: join(dir, 'missing.json') })).toThrow(
        /KEYRELAY_UPSTREAMS: neither JSON nor a readable file/,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    expect(loadConfig({}).namedUpstreams).toEqual([]);
  });

  it.each([
    ['a built-in name', '{"anthropic":{"shape":"anthropic","origin":"https://a.example"}}'],
    ['malformed JSON', '{"azure":'],
    ['no origin', '{"azure":{"shape":"openai"}}'],
    ['a bad name', '{"../x":{"shape":"openai","origin":"https://a.example"}}'],
    ['not an object', '{"azure":"https://a.example"}'],
  ])('refuses KEYRELAY_UPSTREAMS with %s, naming the variable', (_, value) => {
    expect(() => loadConfig({ KEYRELAY_UPSTREAMS: value })).toThrow(ConfigError);
    expect(() => loadConfig({ KEYRELAY_UPSTREAMS: value })).toThrow('KEYRELAY_UPSTREAMS');
  });

  it('keeps the request log searchable by default', () => {
    expect(loadConfig({}).logSearch).toEqual({ enabled: true });
    expect(loadConfig({ KEYRELAY_LOG_SEARCH: 'false' }).logSearch).toEqual({ enabled: false });
  });

  it('takes internal tuning from constants, not from the environment', () => {
    const c = loadConfig({ KEYRELAY_WS_HIGH_WATER_BYTES: '1', KEYRELAY_CLIENT_HEADERS_TIMEOUT_MS: '1' });
    expect(c.ws.highWaterBytes).toBe(1024 * 1024);
    expect(c.guard.clientHeadersTimeoutMs).toBe(20_000);
    // A request may take as long as its headers may.
    expect(loadConfig({ KEYRELAY_CLIENT_REQUEST_TIMEOUT_MS: '1000' }).guard.clientRequestTimeoutMs).toBe(
      20_000,
    );
  });

  it('names the keyrelay variables it does not read', () => {
    expect(
      unknownVariables({
        KEYRELAY_PORT: '1',
        KEYRELAY_LOG_FLUSH_MS: '50',
        KEYRELAY_PROT: '2',
        KEYRELAY_SQLITE_CACHE_MB: '',
        HOME: '/root',
      }),
    ).toEqual(['KEYRELAY_LOG_FLUSH_MS', 'KEYRELAY_PROT']);
  });

  it("passes on glibc malloc's variables and no others", () => {
    expect(
      mallocVariables({
        MALLOC_TRIM_THRESHOLD_: '131072',
        GLIBC_TUNABLES: 'glibc.malloc.arena_max=2',
        KEYRELAY_PORT: '1',
        HOME: '/root',
      }),
    ).toEqual({ MALLOC_TRIM_THRESHOLD_: '131072', GLIBC_TUNABLES: 'glibc.malloc.arena_max=2' });
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
