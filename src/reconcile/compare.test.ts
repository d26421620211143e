import { describe, expect, it } from 'vitest';
import type { LoggedCostRow } from '../store/types.js';
import { compareDay } from './compare.js';
import type { UsageLine } from './usage-report.js';

const row = (over: Partial<LoggedCostRow>): LoggedCostRow => ({
  provider: 'anthropic',
  model: 'claude-sonnet-4-20250514',
  credential_fingerprint: 'f'.repeat(32),
  requests: 1,
  input_tokens: 100,
  cache_read_tokens: 20,
  cache_write_tokens: 30,
  output_tokens: 10,
  cost_usd: 0.001,
  unpriced_requests: 0,
  partial_requests: 0,
  ...over,
});
const line = (over: Partial<UsageLine>): UsageLine => ({
  model: 'claude-sonnet-4-20250514',
  api_key_id: 'apikey_A',
  requests: null,
  input_tokens: 100,
  cache_read_tokens: 20,
  cache_write_tokens: 30,
  output_tokens: 10,
  ...over,
});
const links = [
  { provider: 'anthropic', api_key_id: 'apikey_A', fingerprint: 'f'.repeat(32), created_at: '' },
];

describe('compareDay, tokens', () => {
  it('names Workbench usage (no API key) and says a recent day may not be final', () => {
    const r = compareDay('anthropic', [row({})], {
      bill: null,
      usage: [
        line({}),
        line({ api_key_id: null, input_tokens: 50, cache_read_tokens: 0, cache_write_tokens: 0 }),
      ],
      links,
      final: false,
    });
    expect(r.agrees).toBeNull(); // no bill read
    expect(r.tokens.find((t) => t.kind === 'input')).toEqual({
      kind: 'input',
      keyrelay: 100,
      provider: 150,
      difference: 50,
      drift: 0.333333,
    });
    expect(r.models[0]!.reasons).toEqual([
      "tokens under no API key (the provider console's Workbench or playground)",
      "the provider's report for this day may not be final yet",
    ]);
    const none = r.keys.find((k) => k.api_key_id === null)!;
    expect(none).toMatchObject({ fingerprint: null, keyrelay: null, agrees: null });
    expect(none.reasons[0]).toContain('never through keyrelay');
    expect(r.keys.find((k) => k.api_key_id === 'apikey_A')!.agrees).toBe(true);
  });

  it('compares cache writes for Anthropic only, and a linked credential without calls as bypass', () => {
    const r = compareDay('openai', [], {
      bill: [],
      usage: [line({ model: 'gpt-4o', api_key_id: 'key_A', requests: 2, cache_write_tokens: null })],
      links: [{ provider: 'openai', api_key_id: 'key_A', fingerprint: 'e'.repeat(32), created_at: '' }],
      final: true,
    });
    expect(r.tokens.map((t) => t.kind)).toEqual(['input', 'cache_read', 'output']);
    expect(r.models[0]!.provider.usage!.requests).toBe(2);
    expect(r.keys[0]!.reasons[0]).toContain('no call with this credential passed through keyrelay');
    expect(r.agrees).toBe(false);
  });
});
