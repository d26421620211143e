/**
 * WebSockets in the console, in real Chromium: the browser's own WebSocket opens a Realtime socket through
 * keyrelay with the subprotocol form of the key (`keyrelay-key.<key>`, as a web page must), the request
 * log shows the socket with its response nested under it, and the connection view shows duration, close
 * code, messages and bytes each way, and the response's tokens and cost (computed here from the library).
 */
import { calcPrice } from '@pydantic/genai-prices';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatCost } from '../web/src/lib/format.js';
import { DEFAULT_REALTIME_USAGE } from './fakes/index.js';
import { ensureConsoleBuilt, launchBrowser, screenshotBothWidths } from './helpers/browser.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';

let h: Harness;
let browser: Browser;
let page: Page;
let key: string;
const EMAIL = `ws-console-${Date.now()}@example.com`;

beforeAll(async () => {
  await ensureConsoleBuilt();
  h = await startHarness();
  ({ key } = await h.newUser(EMAIL));
  browser = await launchBrowser();
  page = await browser.newPage();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await h?.close();
});

describe('WebSockets in the console', () => {
  it('a browser WebSocket with the keyrelay-key subprotocol is relayed and logged', async () => {
    await page.goto(`${h.url}/login`);
    await page.getByLabel('Email').fill(EMAIL);
    await page.getByLabel('Password').fill('correct horse battery');
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByRole('link', { name: 'Requests' }).first().waitFor();

    const wsBase = h.url.replace(/^http/, 'ws');
    const result = await page.evaluate(
      async ({ url, key }) => {
        const ws = new WebSocket(url, [
          'realtime',
          `keyrelay-key.${key}`,
          'openai-insecure-api-key.sk-browser',
        ]);
        const types: string[] = [];
        await new Promise<void>((resolve, reject) => {
          ws.onopen = () => ws.send(JSON.stringify({ type: 'response.create', response: {} }));
          ws.onerror = () => reject(new Error('websocket error'));
          ws.onmessage = (m) => {
            const t = (JSON.parse(String(m.data)) as { type: string }).type;
            types.push(t);
            if (t === 'response.done') ws.close(1000, 'done');
          };
          ws.onclose = () => resolve();
        });
        return { protocol: ws.protocol, types };
      },
      { url: `${wsBase}/api/proxy/openai/v1/realtime?model=gpt-realtime`, key },
    );
    expect(result.protocol).toBe('realtime');
    expect(result.types[0]).toBe('session.created');
    expect(result.types).toContain('response.done');
    const up = h.openai.ws.connections[h.openai.ws.connections.length - 1]!;
    expect(up.offered).toEqual(['realtime', 'openai-insecure-api-key.sk-browser']);
  });

  it('groups the socket and its response in the request log, and shows the connection', async () => {
    await h.flushLog();
    await page.getByRole('link', { name: 'Requests' }).first().click();
    const tag = page.getByRole('link', { name: 'WebSocket · 1 response' });
    for (let i = 0; i < 50 && (await tag.count()) === 0; i++) {
      await h.flushLog();
      await page.getByRole('button', { name: 'Refresh' }).click();
      await page.waitForTimeout(200);
    }
    await tag.waitFor();
    expect(await page.getByRole('link', { name: 'on socket' }).count()).toBe(1);
    await screenshotBothWidths(page, 'ws-requests');
    await tag.click();
    await page.getByRole('heading', { name: /WebSocket/ }).waitFor();
    await page.getByText('1000 (normal)').waitFor();
    const d = DEFAULT_REALTIME_USAGE;
    const cost = calcPrice(
      {
        input_tokens: d.input_tokens,
        cache_read_tokens: d.input_token_details.cached_tokens,
        output_tokens: d.output_tokens,
        input_audio_tokens: d.input_token_details.audio_tokens,
        cache_audio_read_tokens: d.input_token_details.cached_tokens_details.audio_tokens,
        output_audio_tokens: d.output_token_details.audio_tokens,
      },
      'gpt-realtime',
      { providerId: 'openai' },
    )!.total_price;
    const table = page.locator('table.connection-responses');
    await expect.poll(() => table.locator('tbody tr').count()).toBe(1);
    const text = await table.innerText();
    expect(text).toContain('gpt-realtime');
    expect(text).toContain('132 / 121');
    expect(text).toContain('13 / 91');
    expect(text).toContain(formatCost(cost));
    expect(await page.getByText('done', { exact: true }).count()).toBe(1); // the close reason
    await screenshotBothWidths(page, 'ws-connection');
  });
});
