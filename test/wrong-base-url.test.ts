/** An SDK pointed at keyrelay's bare address gets a JSON 404 naming the right base URL, not the console. */
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from './helpers/keyrelay.js';

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(() => h.close());

describe('a provider path without /api/proxy/<provider>', () => {
  it('answers GET /v1/models with a JSON 404 in OpenAI error shape that names the base URLs', async () => {
    const res = await request(`${h.url}/v1/models`);
    expect(res.statusCode).toBe(404);
    expect(res.headers['content-type']).toContain('application/json');
    expect(res.headers['x-keyrelay-error']).toBe('wrong_base_url');
    const body = (await res.body.json()) as { error: { code: string; message: string; type: string } };
    expect(body.error.code).toBe('wrong_base_url');
    expect(body.error.type).toBe('invalid_request_error');
    expect(body.error.message).toContain('/api/proxy/openai/v1');
    expect(body.error.message).toContain('/api/proxy/anthropic');
  });

  it('gives the OpenAI and Anthropic SDKs an error they show with that advice', async () => {
    const openai = new OpenAI({ apiKey: 'sk-x', baseURL: `${h.url}/v1`, maxRetries: 0 });
    const oErr = await openai.models.list().then(
      () => null,
      (e: unknown) => e,
    );
    expect(oErr).toBeInstanceOf(OpenAI.NotFoundError);
    expect(String((oErr as Error).message)).toContain('/api/proxy/openai/v1');
    const noV1 = new OpenAI({ apiKey: 'sk-x', baseURL: h.url, maxRetries: 0 });
    const cErr = await noV1.chat.completions.create({ model: 'gpt-4o-mini', messages: [] }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(cErr).toBeInstanceOf(OpenAI.NotFoundError);
    const anthropic = new Anthropic({ apiKey: 'sk-ant-x', baseURL: h.url, maxRetries: 0 });
    const aErr = await anthropic.messages
      .create({ model: 'claude-haiku-4-5', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] })
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(aErr).toBeInstanceOf(Anthropic.NotFoundError);
    expect(String((aErr as Error).message)).toContain('/api/proxy/anthropic');
  });

  it('names the port it listens on when started on port 0 without KEYRELAY_PUBLIC_URL', async () => {
    // The harness starts on KEYRELAY_PORT=0: the default public URL said ":0" until the socket was bound.
    expect(h.url).not.toMatch(/:0$/);
    const res = await request(`${h.url}/v1/models`);
    const body = (await res.body.json()) as { error: { message: string } };
    expect(body.error.message).toContain(`${h.url}/api/proxy/openai/v1`);
    const info = await request(`${h.url}/api/console/info`);
    expect(await info.body.json()).toMatchObject({
      public_url: h.url,
      providers: {
        openai: { base_url: `${h.url}/api/proxy/openai/v1` },
        anthropic: { base_url: `${h.url}/api/proxy/anthropic` },
      },
    });
  });

  it("answers any other unknown path under /api/, or a non-GET, with the console API's not_found", async () => {
    for (const [method, path] of [
      ['GET', '/api/nothing-here'],
      ['POST', '/keys'],
    ] as const) {
      const res = await request(`${h.url}${path}`, { method });
      expect(res.statusCode).toBe(404);
      expect(await res.body.json()).toEqual({ error: { code: 'not_found', message: 'No such endpoint.' } });
    }
  });

  it('still serves the console for its own pages', async () => {
    const res = await request(`${h.url}/requests`);
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toContain('text/html');
    await res.body.dump();
  });
});
