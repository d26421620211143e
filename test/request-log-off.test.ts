/**
 * KEYRELAY_REQUEST_LOG=false: nothing is written, yet every call is still counted. With the log off keyrelay
 * reads no bodies (the row that would hold them is never written), so usage, cost and metrics must come from
 * what the response tap reads for usage alone.
 */
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keepsBodies } from '../src/proxy/exchange.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';

let h: Harness;
let key: string;

beforeAll(async () => {
  h = await startHarness({ KEYRELAY_REQUEST_LOG: 'false' });
  ({ key } = await h.newUser());
});
afterAll(() => h.close());

const metric = async (line: RegExp): Promise<number> => {
  const text = await (await request(`${h.url}/metrics`)).body.text();
  const m = line.exec(text);
  return m ? Number(m[1]) : 0;
};

describe('request log off', () => {
  it('keeps bodies only for a row that will be written, and not when the caller opts out', () => {
    expect(keepsBodies({ requestLog: true }, {})).toBe(true);
    expect(keepsBodies({ requestLog: true }, { 'proxy-log-bodies': 'false' })).toBe(false);
    expect(keepsBodies({ requestLog: false }, {})).toBe(false);
    expect(keepsBodies({ requestLog: false }, { 'proxy-log-bodies': 'true' })).toBe(false);
  });

  it('streams both providers unchanged and still counts their tokens and cost, writing no row', async () => {
    const openai = new OpenAI({
      apiKey: 'sk-test-canary-openai',
      baseURL: `${h.url}/api/proxy/openai/v1`,
      maxRetries: 0,
      defaultHeaders: { 'proxy-api-key': key },
    });
    const chat = { model: 'gpt-4o-mini', messages: [{ role: 'user' as const, content: 'Say hi' }] };
    const direct: unknown[] = [];
    const direct0 = new OpenAI({ apiKey: 'sk-test-canary-openai', baseURL: `${h.openai.url}/v1` });
    for await (const c of await direct0.chat.completions.create({ ...chat, stream: true })) direct.push(c);
    const proxied: unknown[] = [];
    for await (const c of await openai.chat.completions.create({ ...chat, stream: true })) proxied.push(c);
    expect(proxied).toEqual(direct);

    const anthropic = new Anthropic({
      apiKey: 'sk-ant-canary',
      baseURL: `${h.url}/api/proxy/anthropic`,
      maxRetries: 0,
      defaultHeaders: { 'proxy-api-key': key },
    });
    const final = await anthropic.messages
      .stream({
        model: 'claude-sonnet-4-6',
        max_tokens: 100,
        messages: [{ role: 'user', content: 'Say hi' }],
      })
      .finalMessage();
    expect(final.usage.output_tokens).toBeGreaterThan(0);

    // The rows were built (metrics and limits read them) but never queued.
    for (const provider of ['openai', 'anthropic']) {
      expect(
        await metric(new RegExp(`keyrelay_tokens_total\\{provider="${provider}",type="input"\\} (\\d+)`)),
      ).toBeGreaterThan(0);
      expect(
        await metric(new RegExp(`keyrelay_tokens_total\\{provider="${provider}",type="output"\\} (\\d+)`)),
      ).toBeGreaterThan(0);
      expect(
        await metric(new RegExp(`keyrelay_cost_usd_total\\{provider="${provider}"\\} ([0-9.e-]+)`)),
      ).toBeGreaterThan(0);
    }
    expect(await metric(/keyrelay_requests_total\{provider="openai",status="200",outcome="ok"\} (\d+)/)).toBe(
      1,
    );
    await h.flushLog();
    expect(await h.kr.services.logStore.count()).toBe(0);
    expect(await metric(/keyrelay_log_rows_written_total (\d+)/)).toBe(0);
  });
});
