import { calcPrice, findProvider, type ModelInfo, type Provider } from '@pydantic/genai-prices';
import { describe, expect, it } from 'vitest';
import { providerModule } from '../providers/index.js';
import { priceUsage } from './cost.js';
import { flatPlan, flatPrice } from './flat-price.js';
import type { Usage } from './types.js';

type Priced = Record<string, number>;

/** A spread of the usages priceUsage hands the library, and some it refuses (bad splits, overlaps). */
function usages(): Priced[] {
  const fixed: Priced[] = [
    { input_tokens: 0, output_tokens: 0 },
    { input_tokens: 1000, output_tokens: 200 },
    { input_tokens: 200_000, output_tokens: 10 },
    { input_tokens: 200_001, output_tokens: 10, cache_read_tokens: 150_000 },
    { input_tokens: 1_234_567, output_tokens: 98_765, cache_read_tokens: 1_000_000 },
    { input_tokens: 3, output_tokens: 7, cache_read_tokens: 3 },
    { input_tokens: 4740, output_tokens: 255, cache_write_tokens: 4735 },
    { input_tokens: 130, output_tokens: 42, cache_read_tokens: 100, cache_write_tokens: 5 },
    { input_tokens: 9000, output_tokens: 1, cache_write_tokens: 8000, cache_write_1h_tokens: 3000 },
    { input_tokens: 900, output_tokens: 400, input_audio_tokens: 500, output_audio_tokens: 300 },
    {
      input_tokens: 900,
      output_tokens: 400,
      cache_read_tokens: 600,
      input_audio_tokens: 500,
      cache_audio_read_tokens: 200,
      output_audio_tokens: 300,
    },
    // The library refuses these for models pricing cached audio: the overlap is not given.
    { input_tokens: 900, output_tokens: 1, cache_read_tokens: 600, input_audio_tokens: 500 },
    { input_tokens: 100, output_tokens: 1, cache_audio_read_tokens: 50 },
    { input_tokens: 2000, output_tokens: 0, input_image_tokens: 1500 },
    { input_tokens: 2000, output_tokens: 0, input_image_tokens: 1500, cache_read_tokens: 1024 },
    // More parts than the whole: a negative split, which the library refuses.
    { input_tokens: 10, output_tokens: 5, cache_read_tokens: 20 },
    { input_tokens: 10, output_tokens: 5, output_audio_tokens: 6 },
    { input_tokens: 0.5, output_tokens: 1e-9, cache_read_tokens: 0.25 },
    // Tool fees (per call), with tokens on both sides of a long-context threshold.
    { input_tokens: 1000, output_tokens: 200, web_searches: 3 },
    { input_tokens: 300_000, output_tokens: 200, web_searches: 1, storage_searches: 4 },
  ];
  // Pseudo-random mixes (fixed seed), consistent and not.
  let seed = 42;
  const rand = (max: number): number => {
    seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
    return seed % max;
  };
  const random: Priced[] = [];
  for (let i = 0; i < 300; i++) {
    const u: Priced = { input_tokens: rand(i % 3 ? 400_000 : 20_000), output_tokens: rand(50_000) };
    for (const key of [
      'cache_read_tokens',
      'cache_write_tokens',
      'cache_write_1h_tokens',
      'input_audio_tokens',
      'cache_audio_read_tokens',
      'output_audio_tokens',
      'input_image_tokens',
    ]) {
      if (rand(3) === 0) u[key] = 1 + rand(i % 2 ? 200_000 : 20_000);
    }
    if (rand(4) === 0) u.web_searches = rand(20);
    if (rand(4) === 0) u.storage_searches = rand(20);
    random.push(u);
  }
  return [...fixed, ...random];
}

function library(priced: Priced, model: string, providerId: string): number | null | 'refused' {
  try {
    return calcPrice(priced, model, { providerId })?.total_price ?? null;
  } catch {
    return 'refused';
  }
}

/** The library's price for exactly this model entry, whatever name would select it. */
function libraryFor(priced: Priced, provider: Provider, model: ModelInfo): number | null | 'refused' {
  try {
    const only = { ...provider, models: [{ ...model, match: { starts_with: '' } }] };
    return calcPrice(priced, model.id, { provider: only })?.total_price ?? null;
  } catch {
    return 'refused';
  }
}

describe('flatPrice', () => {
  it('equals calcPrice to the last bit for every OpenAI and Anthropic model of the bundled table', () => {
    let direct = 0;
    let library_ = 0;
    for (const provider of ['openai', 'anthropic'] as const) {
      const providerId = providerModule(provider).priceProviderId;
      const entry = findProvider({ providerId })!;
      for (const model of entry.models) {
        const plan = flatPlan(model);
        if (Array.isArray(model.prices)) expect(plan).toBeNull();
        for (const priced of usages()) {
          const expected = libraryFor(priced, entry, model);
          const got = plan ? flatPrice(plan, priced) : undefined;
          if (got === undefined) {
            library_++;
            continue;
          }
          direct++;
          expect({ model: model.id, priced, cost: got }).toEqual({ model: model.id, priced, cost: expected });
        }
      }
    }
    // Most models are flat-priced: the comparison above is not vacuous.
    expect(direct).toBeGreaterThan(library_);
  });

  it('leaves refused usages to the library (which refuses them)', () => {
    const model = findProvider({ providerId: 'openai' })!.models.find(
      (m) => !Array.isArray(m.prices) && m.prices.cache_audio_read_mtok !== undefined,
    )!;
    const plan = flatPlan(model)!;
    expect(plan).not.toBeNull();
    const overlap = { input_tokens: 900, output_tokens: 1, cache_read_tokens: 600, input_audio_tokens: 500 };
    expect(library(overlap, model.id, 'openai')).toBe('refused');
    expect(flatPrice(plan, overlap)).toBeUndefined();
    const negative = { input_tokens: 10, output_tokens: 5, cache_read_tokens: 20 };
    expect(library(negative, model.id, 'openai')).toBe('refused');
    expect(flatPrice(plan, negative)).toBeUndefined();
  });
});

describe('priceUsage with the flat path', () => {
  it('gives calcPrice’s number for every model and a spread of usages, null where it has none', () => {
    for (const provider of ['openai', 'anthropic'] as const) {
      const providerId = providerModule(provider).priceProviderId;
      const names = findProvider({ providerId })!.models.map((m) => m.id);
      for (const name of [...names, 'no-such-model-xyz']) {
        for (const priced of usages().slice(0, 40)) {
          const usage: Usage = {
            input_tokens: priced.input_tokens!,
            output_tokens: priced.output_tokens!,
            cache_read_tokens: priced.cache_read_tokens ?? 0,
            cache_write_tokens: priced.cache_write_tokens ?? 0,
            reasoning_tokens: null,
            source: 'provider',
            model: null,
          };
          const got = priceUsage(providerId, name, usage).cost_usd;
          const only: Priced = { input_tokens: usage.input_tokens!, output_tokens: usage.output_tokens! };
          if (usage.cache_read_tokens) only.cache_read_tokens = usage.cache_read_tokens;
          if (usage.cache_write_tokens) only.cache_write_tokens = usage.cache_write_tokens;
          const expected = library(only, name, providerId);
          if (
            expected === 'refused' ||
            usage.cache_read_tokens! + usage.cache_write_tokens! > usage.input_tokens!
          )
            expect(got).toBeNull();
          else expect({ name, only, got }).toEqual({ name, only, got: expected });
        }
      }
    }
  });
});
