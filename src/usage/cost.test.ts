import { calcPrice } from '@pydantic/genai-prices';
import { describe, expect, it } from 'vitest';
import { priceUsage, PRICE_SOURCE } from './cost.js';
import type { Usage } from './types.js';

function usage(partial: Partial<Usage>): Usage {
  return {
    input_tokens: 1000,
    cache_read_tokens: 0,
    cache_write_tokens: 0,
    output_tokens: 200,
    reasoning_tokens: null,
    source: 'provider',
    model: null,
    ...partial,
  };
}

describe('priceUsage', () => {
  const cases: Array<['openai' | 'anthropic', string, Partial<Usage>]> = [
    ['openai', 'gpt-4o', { input_tokens: 1200, cache_read_tokens: 1024, output_tokens: 300 }],
    ['openai', 'gpt-4o-mini', { input_tokens: 5000, output_tokens: 50 }],
    ['openai', 'gpt-4o-2024-08-06', { input_tokens: 10, output_tokens: 10 }],
    ['openai', 'o3-mini', { input_tokens: 100, output_tokens: 2000, reasoning_tokens: 1500 }],
    ['openai', 'text-embedding-3-small', { input_tokens: 4321, output_tokens: 0 }],
    [
      'anthropic',
      'claude-sonnet-4-20250514',
      { input_tokens: 4740, cache_write_tokens: 4735, output_tokens: 255 },
    ],
    [
      'anthropic',
      'claude-sonnet-4-6',
      { input_tokens: 130, cache_read_tokens: 100, cache_write_tokens: 5, output_tokens: 42 },
    ],
    [
      'anthropic',
      'claude-3-5-haiku-20241022',
      { input_tokens: 2003, cache_write_tokens: 2000, output_tokens: 9 },
    ],
  ];

  it('equals what the library computes for the same usage, cache reads and writes included', () => {
    for (const [provider, model, partial] of cases) {
      const u = usage(partial);
      const direct = calcPrice(
        {
          input_tokens: u.input_tokens!,
          output_tokens: u.output_tokens!,
          cache_read_tokens: u.cache_read_tokens!,
          cache_write_tokens: u.cache_write_tokens!,
        },
        model,
        { providerId: provider },
      );
      expect(direct, model).not.toBeNull();
      const got = priceUsage(provider, model, u);
      expect(got.cost_usd, model).toBeCloseTo(direct!.total_price, 12);
      expect(got.cost_usd, model).toBeGreaterThan(0);
      expect(got.price_source).toBe(PRICE_SOURCE);
    }
  });

  it('charges cached OpenAI tokens at the cache-read rate, inside input_tokens', () => {
    const plain = priceUsage('openai', 'gpt-4o', usage({ input_tokens: 1000, output_tokens: 0 })).cost_usd!;
    const cached = priceUsage(
      'openai',
      'gpt-4o',
      usage({ input_tokens: 1000, cache_read_tokens: 1000, output_tokens: 0 }),
    ).cost_usd!;
    expect(cached).toBeCloseTo(plain / 2, 12); // gpt-4o: cached input at half price
  });

  it("charges Anthropic's 1-hour cache writes at twice the input rate, 5-minute ones at 1.25 times", () => {
    const price = (partial: Partial<Usage>) =>
      priceUsage('anthropic', 'claude-haiku-4-5', usage({ output_tokens: 0, ...partial })).cost_usd!;
    // claude-haiku-4-5: $1 per million input tokens.
    expect(price({ input_tokens: 2000, cache_write_tokens: 2000 })).toBeCloseTo(0.0025, 12);
    expect(price({ input_tokens: 2000, cache_write_tokens: 2000, cache_write_1h_tokens: 2000 })).toBeCloseTo(
      0.004,
      12,
    );
    expect(price({ input_tokens: 2000, cache_write_tokens: 2000, cache_write_1h_tokens: 500 })).toBeCloseTo(
      1500 * 1.25e-6 + 500 * 2e-6,
      12,
    );
  });

  it('names the library and its version as the price source', () => {
    expect(PRICE_SOURCE).toMatch(/^genai-prices@\d+\.\d+\.\d+/);
  });

  it('returns null, never zero, for unknown models or unknown token counts, saying why', () => {
    expect(priceUsage('openai', 'my-private-finetune-xyz', usage({}))).toEqual({
      cost_usd: null,
      price_source: `unpriced: ${PRICE_SOURCE} has no price for my-private-finetune-xyz`,
    });
    expect(priceUsage('anthropic', 'claude-private-xyz', usage({})).cost_usd).toBeNull();
    expect(priceUsage('anthropic', null, usage({}))).toEqual({
      cost_usd: null,
      price_source: 'unpriced: no model named',
    });
    expect(priceUsage('openai', 'gpt-4o', usage({ input_tokens: null }))).toEqual({
      cost_usd: null,
      price_source: 'unpriced: the response reported no usage',
    });
    expect(priceUsage('openai', 'gpt-4o', usage({ input_tokens: 5, cache_read_tokens: 10 }))).toEqual({
      cost_usd: null,
      price_source: 'unpriced: inconsistent token counts',
    });
  });
});

describe('priceUsage: duration and image input', () => {
  it('prices seconds of audio at the library’s input_audio_hours rate', () => {
    const rate = (
      calcPrice({ input_tokens: 0, output_tokens: 0 }, 'whisper-1', { providerId: 'openai' })!
        .model_price as Record<string, number>
    ).input_audio_hours!;
    const got = priceUsage(
      'openai',
      'whisper-1',
      usage({ input_tokens: null, output_tokens: null, input_audio_seconds: 90 }),
    );
    expect(got.cost_usd).toBeCloseTo((90 / 3600) * rate, 12);
    expect(got.price_source).toBe(`${PRICE_SOURCE} input_audio_hours`);
    // A token-priced model has no hourly rate: unpriced, not a guess.
    expect(
      priceUsage(
        'openai',
        'gpt-4o',
        usage({ input_tokens: null, output_tokens: null, input_audio_seconds: 9 }),
      ).cost_usd,
    ).toBeNull();
  });

  it('prices image input tokens at the image rate, and refuses to guess without one', () => {
    const u = { input_tokens: 100, input_image_tokens: 60, output_tokens: 10 };
    expect(priceUsage('openai', 'gpt-image-1', usage(u)).cost_usd).toBeCloseTo(
      calcPrice(u, 'gpt-image-1', { providerId: 'openai' })!.total_price,
      12,
    );
    expect(priceUsage('openai', 'gpt-4o-mini', usage(u)).price_source).toMatch(/has no image price/);
    expect(priceUsage('openai', 'gpt-image-1', usage({ ...u, input_image_tokens: 200 })).cost_usd).toBeNull();
  });
});

describe('priceUsage: audio tokens (Realtime)', () => {
  it('prices audio at its own rate where the library has one', () => {
    const u = usage({
      input_tokens: 1000,
      cache_read_tokens: 300,
      output_tokens: 500,
      input_audio_tokens: 400,
      cache_read_audio_tokens: 100,
      output_audio_tokens: 450,
    });
    const expected = calcPrice(
      {
        input_tokens: 1000,
        cache_read_tokens: 300,
        output_tokens: 500,
        input_audio_tokens: 400,
        cache_audio_read_tokens: 100,
        output_audio_tokens: 450,
      },
      'gpt-realtime',
      { providerId: 'openai' },
    )!.total_price;
    const got = priceUsage('openai', 'gpt-realtime', u);
    expect(got.cost_usd).toBeCloseTo(expected, 12);
    // Audio costs more than text: the same tokens counted as text would be cheaper.
    expect(got.cost_usd!).toBeGreaterThan(
      priceUsage(
        'openai',
        'gpt-realtime',
        usage({ ...u, input_audio_tokens: 0, cache_read_audio_tokens: 0, output_audio_tokens: 0 }),
      ).cost_usd!,
    );
  });

  it('is null, never a text-rate guess, when the model has no audio price', () => {
    const got = priceUsage('openai', 'gpt-4o-mini', usage({ input_audio_tokens: 10 }));
    expect(got).toEqual({
      cost_usd: null,
      price_source: `unpriced: ${PRICE_SOURCE} has no audio price for gpt-4o-mini`,
    });
  });

  it('is null when the audio figures exceed the totals', () => {
    expect(priceUsage('openai', 'gpt-realtime', usage({ output_audio_tokens: 5000 })).cost_usd).toBeNull();
  });
});

describe('priceUsage with tool fees', () => {
  const lib = (model: string, providerId: string, u: Record<string, number>) =>
    calcPrice(u, model, { providerId })!.total_price;

  it('adds the library’s web and file search rates, on flat and on dated (conditional) price entries', () => {
    for (const model of ['gpt-4o', 'o3']) {
      const r = priceUsage('openai', model, usage({ tool_uses: { web_searches: 2, storage_searches: 4 } }));
      expect(r.price_source).toBe(PRICE_SOURCE);
      expect(r.cost_usd).toBeCloseTo(
        lib(model, 'openai', {
          input_tokens: 1000,
          output_tokens: 200,
          web_searches: 2,
          storage_searches: 4,
        }),
        15,
      );
      expect(r.cost_usd! - priceUsage('openai', model, usage({})).cost_usd!).toBeCloseTo(0.02 + 0.01, 15);
    }
  });

  it('is partial, naming the fee, where the model’s entry has no rate for it: the library would ignore it', () => {
    const r = priceUsage('openai', 'gpt-4o-search-preview', usage({ tool_uses: { web_searches: 1 } }));
    expect(r.price_source).toBe(
      `partial: ${PRICE_SOURCE} has no price for web_searches ×1 on gpt-4o-search-preview; the cost leaves them out`,
    );
    expect(r.cost_usd).toBeCloseTo(
      lib('gpt-4o-search-preview', 'openai', { input_tokens: 1000, output_tokens: 200 }),
      15,
    );
  });

  it('is partial for a fee the library has no unit for, and skips fees the provider documents as free', () => {
    const u = usage({ tool_uses: { image_generations: 1, web_fetches: 2 } });
    expect(priceUsage('anthropic', 'claude-sonnet-4-5', u, { web_fetches: 'doc' }).price_source).toMatch(
      /^partial: .* no price for image_generations ×1 on claude-sonnet-4-5/,
    );
    const free = priceUsage('anthropic', 'claude-sonnet-4-5', usage({ tool_uses: { web_fetches: 2 } }), {
      web_fetches: 'doc',
    });
    expect(free.price_source).toBe(PRICE_SOURCE);
  });

  it('stays unpriced when the tokens cannot be priced, whatever the fees', () => {
    const r = priceUsage('openai', 'no-such-model', usage({ tool_uses: { web_searches: 1 } }));
    expect(r).toEqual({
      cost_usd: null,
      price_source: `unpriced: ${PRICE_SOURCE} has no price for no-such-model`,
    });
  });
});
