/**
 * Idle upstream connections are kept for reuse at most UPSTREAM_KEEPALIVE_MS (src/proxy/agent.ts), whatever the
 * provider's Keep-Alive hint says: undici otherwise follows a hint up to 10 minutes, and after a burst of
 * 1,000 streams the process held 1,000 idle sockets (~8 MB of heap here, more with TLS) that long.
 */
import { request } from 'undici';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startHarness, type Harness } from './helpers/keyrelay.js';

let h: Harness;
let key: string;

beforeAll(async () => {
  h = await startHarness({}, { upstreamKeepAliveMs: 1000 });
  ({ key } = await h.newUser());
});
afterAll(() => h.close());

async function chat(): Promise<number> {
  const res = await request(`${h.url}/api/proxy/openai/v1/chat/completions`, {
    method: 'POST',
    headers: { 'proxy-api-key': key, authorization: 'Bearer sk-test', 'content-type': 'application/json' },
    body: '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}',
  });
  await res.body.dump();
  return res.statusCode;
}

async function closedWithin(ms: number): Promise<number> {
  const t0 = Date.now();
  while (h.openai.openSockets() > 0 && Date.now() - t0 < ms) await new Promise((r) => setTimeout(r, 25));
  return Date.now() - t0;
}

it("closes an idle upstream connection after its own keep-alive, not the provider's longer hint", async () => {
  // Node's server sends `Keep-Alive: timeout=120` for this.
  h.openai.server.keepAliveTimeout = 120_000;
  expect(await chat()).toBe(200);
  expect(h.openai.openSockets()).toBe(1);
  const waited = await closedWithin(5_000);
  expect(h.openai.openSockets()).toBe(0);
  expect(waited).toBeGreaterThanOrEqual(500); // kept for reuse meanwhile, not closed after each response
  // And reused while it is kept: two calls in a row are one connection.
  const before = h.openai.socketsClosed.length;
  expect(await chat()).toBe(200);
  expect(await chat()).toBe(200);
  expect(h.openai.openSockets()).toBe(1);
  expect(h.openai.socketsClosed.length).toBe(before);
});
