import { describe, expect, it } from 'vitest';
import type { RequestLogRow } from '../types.js';
import { computeCost } from './index.js';
import { explainRowCost } from './cost-breakdown.js';

function row(over: Partial<RequestLogRow>): RequestLogRow {
  const base = {
    id: '01JTEST0000000000000000000',
    created_at: '2026-11-27T12:00:00.000Z',
    key_id: 'k',
    account_id: 'a',
    provider: 'anthropic',
    method: 'POST',
    path: '/v1/messages',
    model: 'claude-sonnet-4-5',
    stream: false,
    status: 200,
    outcome: 'ok',
    error_code: null,
    latency_ms: 1,
    ttfb_ms: 1,
    input_tokens: 1000,
    cache_read_tokens: 0,
    cache_write_tokens: 0,
    output_tokens: 100,
    reasoning_tokens: null,
    usage_source: 'provider',
    tool_uses: null,
    cost_usd: null,
    price_source: null,
    end_user: null,
    session: null,
    properties: {},
    request_bytes: 0,
    response_bytes: 0,
    request_headers: {},
    response_headers: {},
    request_body: null,
    response_body: null,
    request_body_truncated: false,
    response_body_truncated: false,
    client_ip: null,
    user_agent: null,
    credential_fingerprint: null,
    error_message: null,
    ...over,
  } as RequestLogRow;
  const priced = computeCost(base.provider, base.model, {
    input_tokens: base.input_tokens,
    cache_read_tokens: base.cache_read_tokens,
    cache_write_tokens: base.cache_write_tokens,
    output_tokens: base.output_tokens,
    reasoning_tokens: null,
    ...(base.tool_uses ? { tool_uses: base.tool_uses } : {}),
    source: 'provider',
    model: base.model,
  });
  return { ...base, ...priced, ...over };
}

describe('explainRowCost', () => {
  it('shows each part with its rate, the long-context tier, the search fee and the free fetches', () => {
    const r = row({
      input_tokens: 250_000,
      cache_read_tokens: 50_000,
      tool_uses: { web_searches: 2, web_fetches: 3 },
    });
    const b = explainRowCost(r)!;
    expect(b).not.toBeNull();
    expect(b.total).toBeCloseTo(r.cost_usd!, 12);
    const line = (part: string) => b.lines.find((l) => l.part === part);
    expect(line('input_mtok')).toMatchObject({ quantity: 200_000, rate: 6, per: 1e6, tier_start: 200_000 });
    expect(line('cache_read_mtok')).toMatchObject({ quantity: 50_000, rate: 0.6, tier_start: 200_000 });
    expect(line('output_mtok')).toMatchObject({ quantity: 100, rate: 22.5 });
    expect(line('web_searches_kcount')).toMatchObject({ quantity: 2, rate: 10, per: 1000, cost: 0.02 });
    expect(line('web_fetches')).toMatchObject({ quantity: 3, rate: 0, cost: 0 });
    expect(line('web_fetches')!.note).toMatch(/web-fetch-tool/);
  });

  it('below the threshold takes the base rates', () => {
    const b = explainRowCost(row({ input_tokens: 150_000 }))!;
    expect(b.lines.find((l) => l.part === 'input_mtok')).toMatchObject({ rate: 3, tier_start: null });
  });

  it('names a fee without a price on a partial row, with no rate and no cost', () => {
    const r = row({
      provider: 'openai',
      path: '/v1/responses',
      model: 'gpt-4o',
      tool_uses: { image_generations: 2, web_searches: 1 },
    });
    expect(r.price_source).toMatch(/^partial: /);
    const b = explainRowCost(r)!;
    expect(b.lines.find((l) => l.part === 'image_generations')).toMatchObject({
      quantity: 2,
      rate: null,
      cost: null,
    });
    expect(b.total).toBeCloseTo(r.cost_usd!, 12);
  });

  it('shows no parts that would not add up to the row’s cost, nor for unpriced rows', () => {
    expect(explainRowCost(row({ cost_usd: 1 }))).toBeNull();
    expect(explainRowCost(row({ model: 'no-such-model' }))).toBeNull();
  });
});
