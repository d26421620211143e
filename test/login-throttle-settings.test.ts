/**
 * The console's sign-in throttle takes its limits from the configuration (its constants, or a test's
 * tuning): keyrelay runs in this process on a real socket, and sign-ups over HTTP from one IP fill that
 * IP's window.
 */
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from './helpers/keyrelay.js';

describe('the login throttle, per IP and per email', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({}, { loginThrottle: { windowMs: 15 * 60_000, maxPerIp: 3, maxPerEmail: 2 } });
  });
  afterAll(() => h?.close());

  const post = async (path: string, body: unknown) => {
    const r = await request(`${h.url}/api/console/${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: h.url },
      body: JSON.stringify(body),
    });
    return { status: r.statusCode, json: (await r.body.json()) as { error?: { code: string } } };
  };

  it('refuses the sign-up past the configured per-IP limit, and a login past the per-email one', async () => {
    const password = 'correct horse battery';
    const wrong = { email: 'someone@example.com', password: 'not the password' };
    expect((await post('login', wrong)).status).toBe(401);
    expect((await post('login', wrong)).status).toBe(401);
    const third = await post('login', wrong);
    expect([third.status, third.json.error?.code]).toEqual([429, 'too_many_attempts']);
    // Three attempts from this IP so far (the refused one is not counted: two): one more sign-up fits.
    expect((await post('signup', { email: 'a@example.com', password })).status).toBe(202);
    const over = await post('signup', { email: 'b@example.com', password });
    expect([over.status, over.json.error?.code]).toEqual([429, 'too_many_attempts']);
  });
});
