/** One chat call and one message through keyrelay with the official SDKs; the request ids keyrelay gave them. */
import type Anthropic from '@anthropic-ai/sdk';
import type OpenAI from 'openai';
import { expect } from 'vitest';

export async function callBoth(oa: OpenAI, an: Anthropic, text: string): Promise<string[]> {
  const chat = await oa.chat.completions
    .create({ model: 'gpt-4o', messages: [{ role: 'user', content: text }] })
    .withResponse();
  expect(chat.data.choices[0]?.message.content).toBeTruthy();
  const msg = await an.messages
    .create({ model: 'claude-sonnet-4-6', max_tokens: 64, messages: [{ role: 'user', content: text }] })
    .withResponse();
  expect(msg.data.content.length).toBeGreaterThan(0);
  return [chat, msg].map((r) => r.response.headers.get('x-keyrelay-request-id')!);
}
