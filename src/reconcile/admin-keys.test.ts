import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../config.js';

const KEY = 'sk-admin-unitCanary0123456789';

describe('admin keys in the configuration', () => {
  it('are read from the providers’ own variables and never printed with the configuration', () => {
    const config = loadConfig({ OPENAI_ADMIN_KEY: KEY });
    expect(config.adminKeys.configured).toEqual(['openai']);
    expect(config.adminKeys.withKey('openai', (k) => k)).toBe(KEY);
    expect(config.adminKeys.withKey('anthropic', (k) => k)).toBeUndefined();
    expect(JSON.stringify(config)).not.toContain(KEY);
    expect(inspect(config, { depth: 10 })).not.toContain(KEY);
    expect(JSON.stringify(config.adminKeys)).toBe('{"configured":["openai"]}');
  });

  it('redact takes every configured key out of a text', () => {
    const { adminKeys } = loadConfig({ OPENAI_ADMIN_KEY: KEY, ANTHROPIC_ADMIN_KEY: 'sk-ant-admin01-x' });
    expect(adminKeys.redact(`bad ${KEY} and sk-ant-admin01-x`)).toBe('bad [admin key] and [admin key]');
  });

  it('an empty variable is no key', () => {
    expect(loadConfig({ OPENAI_ADMIN_KEY: ' ' }).adminKeys.configured).toEqual([]);
  });
});
