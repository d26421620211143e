/**
 * A failure of keyrelay's own is never a bare 500: it answers 500 `proxy_internal_error` in the route's
 * provider shape (so the official SDKs raise their usual error), with an `x-keyrelay-request-id` that names
 * a logged row. Provoked for real: a key row whose `allowed_models` holds JSON that is not a list (written
 * by hand into the database, as an operator or an older version might), which the limits cannot read.
 */
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openConnection } from '../src/store/sqlite/driver.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';

let h: Harness;
let user: { key: string; keyId: string; accountId: string };

beforeAll(async () => {
  h = await startHarness();
  user = await h.newUser();
  // Before the key's first use, so no cache holds the readable record.
  const db = openConnection(join(h.dataDir, 'keyrelay.db'));
  db.prepare('UPDATE keys SET allowed_models = ? WHERE id = ?').run('42', user.keyId);
  db.close();
});
afterAll(() => h.close());

async function loggedRow(requestId: string) {
  await h.flushLog();
  return h.kr.services.logStore.getRequest(user.accountId, requestId);
}

describe('an internal failure', () => {
  it('answers 500 proxy_internal_error in OpenAI shape, through the SDK, and logs the row', async () => {
    const sent = h.openai.requests.length;
    const client = new OpenAI({
      apiKey: 'sk-test',
      baseURL: `${h.url}/api/proxy/openai/v1`,
      defaultHeaders: { 'proxy-api-key': user.key },
      maxRetries: 0,
    });
    const err = await client.chat.completions
      .create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(OpenAI.InternalServerError);
    const e = err as InstanceType<typeof OpenAI.InternalServerError>;
    expect(e.status).toBe(500);
    expect(e.code).toBe('proxy_internal_error');
    expect(e.headers?.get('x-keyrelay-error')).toBe('proxy_internal_error');
    const id = e.headers?.get('x-keyrelay-request-id');
    expect(id).toBeTruthy();
    expect(h.openai.requests.length).toBe(sent); // failed before anything went upstream
    expect(await loggedRow(id!)).toMatchObject({
      id,
      key_id: user.keyId,
      status: 500,
      outcome: 'refused',
      error_code: 'proxy_internal_error',
      model: 'gpt-4o-mini',
    });
  });

  it('answers in Anthropic shape on the Anthropic route', async () => {
    const client = new Anthropic({
      apiKey: 'sk-ant-test',
      baseURL: `${h.url}/api/proxy/anthropic`,
      defaultHeaders: { 'proxy-api-key': user.key },
      maxRetries: 0,
    });
    const err = await client.messages
      .create({ model: 'claude-sonnet-4-6', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] })
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(Anthropic.InternalServerError);
    const e = err as InstanceType<typeof Anthropic.InternalServerError>;
    expect(e.error).toMatchObject({ type: 'error', error: { type: 'api_error' } });
    expect(e.message).toContain('(proxy_internal_error)');
    const id = e.headers?.get('x-keyrelay-request-id');
    expect(await loggedRow(id!)).toMatchObject({ provider: 'anthropic', error_code: 'proxy_internal_error' });
  });

  it('keeps serving: the same instance still answers other keys', async () => {
    const other = await h.newUser();
    const client = new OpenAI({
      apiKey: 'sk-test',
      baseURL: `${h.url}/api/proxy/openai/v1`,
      defaultHeaders: { 'proxy-api-key': other.key },
      maxRetries: 0,
    });
    const r = await client.chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(r.choices.length).toBeGreaterThan(0);
  });
});
