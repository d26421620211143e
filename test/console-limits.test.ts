/** Console API for key limits: PATCH /keys/:id and POST /keys take them, key views show them. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KeyEvent } from '../src/keys/events.js';
import { startConsole, type Client, type ConsoleApp } from './console-harness.js';

let s: ConsoleApp;
const events: KeyEvent[] = [];
beforeAll(async () => {
  s = await startConsole();
  s.bus.subscribe((e) => events.push(e));
});
afterAll(() => s.close());

let n = 0;
async function signedIn(): Promise<{ c: Client; id: string }> {
  const c = s.client();
  await c.signup(`limits${++n}-${Date.now()}@example.com`);
  return { c, id: (await c.get('/keys')).json.keys[0].id as string };
}

const UNLIMITED = {
  allowed_providers: null,
  allowed_models: null,
  rate_limit_rpm: null,
  budget_usd: null,
  budget_period: null,
  budget_mode: 'soft',
  rate_limit_tpm: null,
  max_concurrent: null,
  rate_limit_scope: 'billable',
  budget_unpriced: 'refuse',
  user_rate_limit_rpm: null,
  user_budget_usd: null,
  user_budget_period: null,
  user_budget_mode: 'soft',
};

describe('key limits in the console API', () => {
  it('shows every key with its limits, all null (unlimited) by default', async () => {
    const { c } = await signedIn();
    expect((await c.get('/keys')).json.keys[0]).toMatchObject(UNLIMITED);
  });

  it('sets limits with PATCH, keeping fields left out, clearing fields sent as null, and publishes key_changed', async () => {
    const { c, id } = await signedIn();
    events.length = 0;
    const r = await c.patch(`/keys/${id}`, {
      allowed_providers: ['openai'],
      allowed_models: ['gpt-4o-mini', 'gpt-4.1*'],
      rate_limit_rpm: 60,
      budget_usd: 25,
    });
    expect(r.status).toBe(200);
    expect(r.json.key).toMatchObject({
      id,
      name: 'default',
      status: 'active',
      allowed_providers: ['openai'],
      allowed_models: ['gpt-4o-mini', 'gpt-4.1*'],
      rate_limit_rpm: 60,
      budget_usd: 25,
      budget_period: 'month',
    });
    expect(events).toEqual([{ type: 'key_changed', key_id: id }]);

    const r2 = await c.patch(`/keys/${id}`, { name: 'ci', rate_limit_rpm: null, budget_period: 'day' });
    expect(r2.json.key).toMatchObject({
      name: 'ci',
      allowed_providers: ['openai'],
      rate_limit_rpm: null,
      budget_usd: 25,
      budget_period: 'day',
    });
    expect((await c.get('/keys')).json.keys[0]).toEqual(r2.json.key);
    const cleared = await c.patch(`/keys/${id}`, { ...UNLIMITED });
    expect(cleared.json.key).toMatchObject({ name: 'ci', ...UNLIMITED });
  });

  it('refuses out-of-range limits with 400 invalid_limits and changes nothing', async () => {
    const { c, id } = await signedIn();
    const cases = [
      { rate_limit_rpm: 0 },
      { rate_limit_rpm: 1_000_001 },
      { budget_usd: 0.001 },
      { budget_usd: 2_000_000 },
      { allowed_models: Array.from({ length: 51 }, (_, i) => `m${i}`) },
      { allowed_models: ['gpt*mini'] },
      { budget_period: 'day' },
      { rate_limit_tpm: 0 },
      { max_concurrent: 0 },
      { max_concurrent: 1.5 },
      // A well-formed name this deployment has no upstream for.
      { allowed_providers: ['azure'] },
    ];
    for (const body of cases) {
      const r = await c.patch(`/keys/${id}`, body);
      expect([r.status, r.json.error.code], JSON.stringify(body)).toEqual([400, 'invalid_limits']);
    }
    for (const body of [
      { allowed_providers: ['Azure!'] },
      { rate_limit_rpm: '5' },
      { budget_period: 'week' },
      { budget_mode: 'strict' },
      { budget_mode: null },
      { rate_limit_scope: 'none' },
      { budget_unpriced: 'sometimes' },
      { budget_unpriced: null },
    ]) {
      expect((await c.patch(`/keys/${id}`, body)).json.error.code, JSON.stringify(body)).toBe(
        'invalid_request',
      );
    }
    const badName = await c.patch(`/keys/${id}`, { name: ' ', rate_limit_rpm: 5 });
    expect(badName.json.error.code).toBe('invalid_name');
    expect((await c.patch(`/keys/${id}`, {})).json.error.code).toBe('invalid_request');
    expect((await c.get('/keys')).json.keys[0]).toMatchObject({ name: 'default', ...UNLIMITED });
  });

  it('creates a key with limits, and a roll carries them to the new key', async () => {
    const { c } = await signedIn();
    const r = await c.post('/keys', {
      name: 'capped',
      rate_limit_rpm: 10,
      budget_usd: 5,
      budget_period: 'day',
      budget_mode: 'hard',
      rate_limit_tpm: 50_000,
      max_concurrent: 3,
      rate_limit_scope: 'all',
      budget_unpriced: 'allow',
    });
    expect(r.status).toBe(201);
    const capped = {
      budget_unpriced: 'allow',
      rate_limit_rpm: 10,
      budget_usd: 5,
      budget_period: 'day',
      budget_mode: 'hard',
      rate_limit_tpm: 50_000,
      max_concurrent: 3,
      rate_limit_scope: 'all',
    };
    expect(r.json.key).toMatchObject({ name: 'capped', ...capped });
    const rolled = await c.post(`/keys/${r.json.key.id}/roll`, { grace_seconds: 0 });
    expect(rolled.json.key).toMatchObject(capped);
    expect((await c.post('/keys', { name: 'x', rate_limit_rpm: -1 })).json.error.code).toBe('invalid_limits');
  });

  it('answers 404 for another account’s key', async () => {
    const { id } = await signedIn();
    const { c } = await signedIn();
    expect((await c.patch(`/keys/${id}`, { rate_limit_rpm: 5 })).json.error.code).toBe('key_not_found');
  });
});
