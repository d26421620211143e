/**
 * A log row's cost, part by part, for the console's row detail: rebuilt from the row's own counts with the
 * price library at the row's time. Only rows priced from token usage at the library's standard prices
 * (whole or partial) have parts; the rest say how they were priced in price_source alone.
 */
import { providerModule } from '../providers/index.js';
import type { RequestLogRow } from '../types.js';
import { explainUsageCost, PARTIAL, PRICE_SOURCE, type CostBreakdown } from '../usage/index.js';

export function explainRowCost(row: RequestLogRow): CostBreakdown | null {
  const source = row.price_source ?? '';
  const standard = source === PRICE_SOURCE || source.startsWith(`${PARTIAL}: ${PRICE_SOURCE} `);
  if (!standard || /\bbatch\b/.test(source) || row.cost_usd === null || row.model === null) return null;
  const module = providerModule(row.provider);
  if (!module) return null;
  return explainUsageCost(
    module.priceProviderId,
    row.model,
    {
      input_tokens: row.input_tokens,
      cache_read_tokens: row.cache_read_tokens,
      cache_write_tokens: row.cache_write_tokens,
      output_tokens: row.output_tokens,
      reasoning_tokens: row.reasoning_tokens,
      ...(row.input_audio_tokens ? { input_audio_tokens: row.input_audio_tokens } : {}),
      ...(row.cache_read_audio_tokens ? { cache_read_audio_tokens: row.cache_read_audio_tokens } : {}),
      ...(row.output_audio_tokens ? { output_audio_tokens: row.output_audio_tokens } : {}),
      ...(row.tool_uses ? { tool_uses: row.tool_uses } : {}),
      source: row.usage_source,
      model: row.model,
    },
    module.freeToolFees,
    new Date(row.created_at),
    row.cost_usd,
  );
}
