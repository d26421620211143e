/**
 * The test output stays free of the Anthropic SDK's deprecation notices: every Claude model name that a file
 * driving the SDK (tests, and the console's snippets a user copies) mentions is sent through the real SDK
 * here, and must not make it warn. The request goes to a port nothing listens on: the notice, when there is
 * one, is printed before anything is sent.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Anthropic from '@anthropic-ai/sdk';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { freePort } from './helpers/process.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** Files that call the Anthropic SDK, or give a user code that does. */
function sdkFiles(): string[] {
  const tests = readdirSync(join(ROOT, 'test'), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => join(ROOT, 'test', f))
    .filter((f) => readFileSync(f, 'utf8').includes("from '@anthropic-ai/sdk'"));
  return [...tests, join(ROOT, 'web/src/lib/snippets.ts')];
}

function claudeModels(): Map<string, string> {
  const found = new Map<string, string>();
  for (const file of sdkFiles())
    for (const [, model] of readFileSync(file, 'utf8').matchAll(/['"`](claude-[a-z0-9.-]+)['"`]/g))
      if (!found.has(model!)) found.set(model!, file.slice(ROOT.length));
  return found;
}

describe('model names in SDK calls', () => {
  afterEach(() => vi.restoreAllMocks());

  it('are ones the Anthropic SDK does not warn about', async () => {
    const models = claudeModels();
    expect(models.size).toBeGreaterThan(2);
    const client = new Anthropic({
      apiKey: 'x',
      baseURL: `http://127.0.0.1:${await freePort()}`,
      maxRetries: 0,
    });
    const warned: string[] = [];
    vi.spyOn(console, 'warn').mockImplementation((...args: unknown[]) => void warned.push(String(args[0])));
    const noticed: string[] = [];
    for (const [model, file] of models) {
      warned.length = 0;
      await client.messages
        .create({ model, max_tokens: 1, messages: [{ role: 'user', content: 'hi' }] })
        .catch(() => {});
      if (warned.some((w) => w.includes(model))) noticed.push(`${model} (${file})`);
    }
    expect(noticed).toEqual([]);
  });
});
