/** Health, readiness and Prometheus metrics, as an operator and a scraper see them. */
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from './helpers/keyrelay.js';

let h: Harness;
let key: string;
beforeAll(async () => {
  h = await startHarness();
  ({ key } = await h.newUser());
});
afterAll(() => h.close());

const get = async (path: string) => {
  const res = await request(h.url + path);
  return { status: res.statusCode, type: String(res.headers['content-type']), text: await res.body.text() };
};

describe('operations endpoints', () => {
  it('answers /healthz and /readyz', async () => {
    expect(await get('/healthz')).toMatchObject({ status: 200 });
    expect(await get('/readyz')).toMatchObject({ status: 200 });
  });

  it('exposes requests, latency, tokens, cost, upstream errors and the log queue in Prometheus text', async () => {
    for (const status of [undefined, '500']) {
      const res = await request(`${h.url}/api/proxy/openai/v1/chat/completions`, {
        method: 'POST',
        headers: {
          'proxy-api-key': key,
          'content-type': 'application/json',
          ...(status ? { 'x-fake-status': status } : {}),
        },
        body: JSON.stringify({ model: 'gpt-4o', messages: [] }),
      });
      await res.body.dump();
    }
    await h.flushLog();
    const m = await get('/metrics');
    expect(m.type).toContain('text/plain');
    expect(m.text).toContain('keyrelay_requests_total{provider="openai",status="200",outcome="ok"} 1');
    expect(m.text).toContain(
      'keyrelay_requests_total{provider="openai",status="500",outcome="upstream_error"} 1',
    );
    expect(m.text).toMatch(/keyrelay_request_duration_seconds_count\{provider="openai"\} 2/);
    expect(m.text).toMatch(/keyrelay_time_to_first_byte_seconds_bucket/);
    expect(m.text).toContain('keyrelay_tokens_total{provider="openai",type="input"} 11');
    expect(m.text).toMatch(/keyrelay_cost_usd_total\{provider="openai"\} [0-9.e-]+/);
    expect(m.text).toContain('keyrelay_upstream_errors_total{provider="openai",kind="status_5xx"} 1');
    expect(m.text).toContain('keyrelay_log_queue_depth 0');
    expect(m.text).toContain('keyrelay_log_rows_written_total 2');
    expect(m.text).toMatch(/nodejs_eventloop_lag_p99_seconds/);
  });

  it('turns /readyz to 503 while draining', async () => {
    const slow = request(`${h.url}/api/proxy/anthropic/v1/messages`, {
      method: 'POST',
      headers: { 'proxy-api-key': key, 'content-type': 'application/json', 'x-fake-event-delay-ms': '100' },
      body: JSON.stringify({ model: 'claude-sonnet-4-6', max_tokens: 5, stream: true, messages: [] }),
    });
    const res = await slow;
    const stopping = h.kr.stop();
    const ready = await h.kr.app.inject({ url: '/readyz' });
    expect(ready.statusCode).toBe(503);
    // The stream in flight still completes cleanly.
    expect(await res.body.text()).toContain('message_stop');
    await stopping;
  });
});
