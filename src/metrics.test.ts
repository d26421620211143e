import { describe, expect, it } from 'vitest';
import type { RequestLogRow } from './types.js';
import { createMetrics, observeRow } from './metrics.js';

function row(over: Partial<RequestLogRow>): RequestLogRow {
  return {
    provider: 'openai',
    status: 200,
    outcome: 'ok',
    latency_ms: 12,
    ttfb_ms: 3,
    input_tokens: 10,
    cache_read_tokens: null,
    cache_write_tokens: null,
    output_tokens: 4,
    reasoning_tokens: 0,
    cost_usd: 0.5,
    ...over,
  } as RequestLogRow;
}

/** Unlabelled-by-name samples of one scrape, `name{labels} value` → value. */
async function scrape(m: ReturnType<typeof createMetrics>): Promise<Map<string, number>> {
  const text = await m.registry.metrics();
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const match = /^(keyrelay_(?:requests|tokens|cost_usd|tool_uses)_total\{[^}]*\}) (\S+)$/.exec(line);
    if (match) out.set(match[1]!, Number(match[2]));
  }
  return out;
}

describe('observeRow', () => {
  it('counts requests, tokens and cost per label set, and every scrape shows the running totals', async () => {
    const m = createMetrics();
    observeRow(m, row({}));
    observeRow(m, row({ status: 429, outcome: 'upstream_error', input_tokens: null, output_tokens: null }));
    observeRow(m, row({ provider: 'anthropic', cache_read_tokens: 6, cost_usd: 0.25 }));
    const first = await scrape(m);
    expect(first.get('keyrelay_requests_total{provider="openai",status="200",outcome="ok"}')).toBe(1);
    expect(
      first.get('keyrelay_requests_total{provider="openai",status="429",outcome="upstream_error"}'),
    ).toBe(1);
    expect(first.get('keyrelay_requests_total{provider="anthropic",status="200",outcome="ok"}')).toBe(1);
    expect(first.get('keyrelay_tokens_total{provider="openai",type="input"}')).toBe(10);
    expect(first.get('keyrelay_tokens_total{provider="anthropic",type="cache_read"}')).toBe(6);
    expect(first.has('keyrelay_tokens_total{provider="openai",type="reasoning"}')).toBe(false);
    expect(first.get('keyrelay_cost_usd_total{provider="openai"}')).toBe(1);

    // A second scrape with nothing new must not count anything twice.
    expect(await scrape(m)).toEqual(first);

    observeRow(m, row({ output_tokens: 5 }));
    const second = await scrape(m);
    expect(second.get('keyrelay_requests_total{provider="openai",status="200",outcome="ok"}')).toBe(2);
    expect(second.get('keyrelay_tokens_total{provider="openai",type="output"}')).toBe(9);
    expect(second.get('keyrelay_cost_usd_total{provider="openai"}')).toBe(1.5);
  });

  it('ignores a negative or non-finite figure instead of breaking every later scrape', async () => {
    const m = createMetrics();
    observeRow(m, row({ input_tokens: -3, output_tokens: Number.NaN, cost_usd: Number.POSITIVE_INFINITY }));
    const s = await scrape(m);
    expect(s.get('keyrelay_requests_total{provider="openai",status="200",outcome="ok"}')).toBe(1);
    expect(s.has('keyrelay_tokens_total{provider="openai",type="input"}')).toBe(false);
    expect(s.has('keyrelay_cost_usd_total{provider="openai"}')).toBe(false);
  });
});

describe('tool uses', () => {
  it('counts each fee by provider, priced="no" where the row is partial for it', async () => {
    const m = createMetrics();
    observeRow(m, row({ tool_uses: { web_searches: 3 }, price_source: 'genai-prices@0.1.8' }));
    observeRow(
      m,
      row({
        tool_uses: { web_searches: 1, image_generations: 2 },
        price_source:
          'partial: genai-prices@0.1.8 has no price for image_generations ×2 on gpt-4o; the cost leaves them out',
      }),
    );
    const s = await scrape(m);
    expect(s.get('keyrelay_tool_uses_total{provider="openai",fee="web_searches",priced="yes"}')).toBe(4);
    expect(s.get('keyrelay_tool_uses_total{provider="openai",fee="image_generations",priced="no"}')).toBe(2);
  });
});
