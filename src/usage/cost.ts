/** Request cost from @pydantic/genai-prices' bundled price data (SPEC §5: a maintained library). */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { calcPrice } from '@pydantic/genai-prices';
import type { Usage } from './types.js';

function readLibraryVersion(): string {
  try {
    // The package exports no ./package.json; find it beside its entry point.
    const entry = createRequire(import.meta.url).resolve('@pydantic/genai-prices');
    const pkg = JSON.parse(readFileSync(join(dirname(entry), '..', 'package.json'), 'utf8')) as { version?: unknown };
    return typeof pkg.version === 'string' ? pkg.version : 'unknown';
  } catch {
    return 'unknown';
  }
}

/** The library version pins its bundled price snapshot; we never auto-update it at run time. */
export const PRICE_SOURCE = `genai-prices@${readLibraryVersion()}`;

/** Models the library does not know, so repeated misses skip its matching (bounded). */
const unknownModels = new Set<string>();
const UNKNOWN_MAX = 1000;

export function computeCost(
  provider: 'openai' | 'anthropic',
  model: string | null,
  usage: Usage,
): { cost_usd: number | null; price_source: string | null } {
  const none = { cost_usd: null, price_source: null };
  if (!model || usage.input_tokens === null || usage.output_tokens === null) return none;
  const cacheKey = `${provider}\u0000${model}`;
  if (unknownModels.has(cacheKey)) return none;
  // The library wants input_tokens as the total (uncached + cache reads + cache writes), like our Usage.
  const priced: Record<string, number> = {
    input_tokens: usage.input_tokens,
    output_tokens: usage.output_tokens,
  };
  const cacheRead = usage.cache_read_tokens ?? 0;
  const cacheWrite = usage.cache_write_tokens ?? 0;
  if (cacheRead > 0) priced.cache_read_tokens = cacheRead;
  if (cacheWrite > 0) priced.cache_write_tokens = cacheWrite;
  if (cacheRead + cacheWrite > usage.input_tokens) return none; // inconsistent figures: no guess
  let result: ReturnType<typeof calcPrice>;
  try {
    result = calcPrice(priced, model, { providerId: provider });
  } catch {
    return none;
  }
  if (!result) {
    if (unknownModels.size >= UNKNOWN_MAX) unknownModels.clear();
    unknownModels.add(cacheKey);
    return none;
  }
  return { cost_usd: result.total_price, price_source: PRICE_SOURCE };
}
