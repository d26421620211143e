import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import type { KeyRecord } from '../store/types.js';
import { parseRequestInfo } from '../metering/index.js';
import { newExchange, toLogRow, type RowSettings } from './exchange.js';

function row(body: Buffer, bodyLogBytes: number) {
  const ex = newExchange({ id: 'r1', at: '2026-03-01T10:00:00.000Z' }, 0, '127.0.0.1');
  ex.provider = 'openai';
  ex.path = '/v1/chat/completions';
  ex.key = { id: 'k1', account_id: 'a1' } as KeyRecord;
  ex.requestBody = body;
  ex.info = parseRequestInfo('openai', '/v1/chat/completions', body, 'application/json');
  ex.status = 200;
  const req = {
    headers: { 'content-type': 'application/json' },
    method: 'POST',
  } as unknown as IncomingMessage;
  const settings: RowSettings = {
    config: { bodyLogBytes, trustProxy: false },
    fingerprint: () => 'fp',
    cost: () => ({ cost_usd: null, price_source: null }),
  };
  return toLogRow(ex, req, settings, 1);
}

describe('toLogRow request body', () => {
  it('logs the same text whether it reuses the parse’s decoding or decodes a prefix', () => {
    const text = JSON.stringify({
      model: 'gpt-4o',
      messages: [{ role: 'user', content: 'héllo ✓ 🙂 '.repeat(40) }],
    });
    const body = Buffer.from(text);
    expect(parseRequestInfo('openai', '/v1/chat/completions', body, 'application/json').text).toBe(text);
    expect(row(body, 65536)).toMatchObject({ request_body: text, request_body_truncated: false });
    // Cut inside a multibyte character: the prefix is decoded from the bytes, as before.
    for (const limit of [body.length - 1, 101, 102, 103]) {
      const logged = row(body, limit);
      expect(logged.request_body).toBe(body.subarray(0, limit).toString('utf8'));
      expect(logged.request_body_truncated).toBe(true);
    }
  });

  it('does not hold the decoded text of a body larger than the default log limit', () => {
    const body = Buffer.from(JSON.stringify({ model: 'gpt-4o', input: 'x'.repeat(70 * 1024) }));
    expect(parseRequestInfo('openai', '/v1/embeddings', body, 'application/json').text).toBeUndefined();
    expect(row(body, 1024 * 1024).request_body).toBe(body.toString('utf8'));
  });
});
