/**
 * An upstream may send informational (1xx) heads before its answer, e.g. 103 Early Hints from a CDN in
 * front of the provider. They are not the answer: the caller gets the final head and body, the log row
 * its status and usage, whether the answer is a JSON body or a stream keyrelay asked usage for.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from './helpers/keyrelay.js';

const COMPLETION = {
  id: 'chatcmpl-hints',
  object: 'chat.completion',
  created: 1_700_000_000,
  model: 'gpt-4o-mini',
  choices: [{ index: 0, message: { role: 'assistant', content: 'hinted' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 },
};

const chunk = (delta: object, usage: object | null | undefined, choices = true) =>
  `data: ${JSON.stringify({
    id: 'chatcmpl-hints',
    object: 'chat.completion.chunk',
    created: 1_700_000_000,
    model: 'gpt-4o-mini',
    choices: choices ? [{ index: 0, delta, finish_reason: null }] : [],
    usage,
  })}\n\n`;

let upstream: Server;
let h: Harness;
let user: { key: string; accountId: string };
let client: OpenAI;

beforeAll(async () => {
  upstream = createServer((req, res) => {
    let body = '';
    req.on('data', (b: Buffer) => (body += b.toString()));
    req.on('end', () => {
      res.writeEarlyHints({ link: '</style.css>; rel=preload; as=style' });
      const asked = JSON.parse(body) as { stream?: boolean; stream_options?: { include_usage?: boolean } };
      if (!asked.stream) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(COMPLETION));
        return;
      }
      const usage = asked.stream_options?.include_usage === true;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(chunk({ role: 'assistant', content: 'hin' }, usage ? null : undefined));
      res.write(chunk({ content: 'ted' }, usage ? null : undefined));
      if (usage) res.write(chunk({}, COMPLETION.usage, false));
      res.end('data: [DONE]\n\n');
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const { port } = upstream.address() as AddressInfo;
  h = await startHarness({ KEYRELAY_OPENAI_UPSTREAM: `http://127.0.0.1:${port}` });
  user = await h.newUser();
  client = new OpenAI({
    apiKey: 'sk-test-hints',
    baseURL: `${h.url}/api/proxy/openai/v1`,
    maxRetries: 0,
    defaultHeaders: { 'proxy-api-key': user.key },
  });
});
afterAll(async () => {
  await h.close();
  await new Promise((resolve) => upstream.close(resolve));
});

async function row(id: string) {
  await h.flushLog();
  return h.kr.services.logStore.getRequest(user.accountId, id);
}

describe('1xx heads from upstream', () => {
  it('answers with the final head and body after a 103, and logs its usage', async () => {
    const { data, response } = await client.chat.completions
      .create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })
      .withResponse();
    expect(response.status).toBe(200);
    expect(data.choices[0]!.message.content).toBe('hinted');
    const logged = await row(response.headers.get('x-keyrelay-request-id')!);
    expect(logged).toMatchObject({ status: 200, outcome: 'ok', input_tokens: 7, output_tokens: 3 });
  });

  it('streams after a 103, stripping the usage keyrelay asked for, and logs it', async () => {
    const { data: stream, response } = await client.chat.completions
      .create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], stream: true })
      .withResponse();
    const seen: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    for await (const c of stream) seen.push(c);
    expect(seen.map((c) => c.choices[0]?.delta.content).join('')).toBe('hinted');
    expect(seen.every((c) => c.usage === undefined && c.choices.length === 1)).toBe(true);
    const logged = await row(response.headers.get('x-keyrelay-request-id')!);
    expect(logged).toMatchObject({ status: 200, outcome: 'ok', stream: true, input_tokens: 7 });
  });
});
