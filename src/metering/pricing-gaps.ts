/**
 * What the price library could not price in a range of the log (`keyrelay prices`): the models whose calls
 * were unpriced, and the tool fees left out of partial costs, with counts, so an operator knows what the
 * library lacks and which upgrade would fill it. Counts are read back from price_source, which names each
 * missing fee with its count per row.
 */
import type { PricingGapRow } from '../store/types.js';
import { missingFees, PRICE_SOURCE } from '../usage/index.js';

export interface PricingGaps {
  from: string;
  to: string;
  /** The price library this keyrelay prices with; rows name the one they were priced with. */
  price_library: string;
  unpriced: Array<{ provider: string; model: string | null; reason: string; requests: number }>;
  partial: Array<{ provider: string; model: string | null; fee: string; requests: number; uses: number }>;
}

export function summarizePricingGaps(from: string, to: string, rows: readonly PricingGapRow[]): PricingGaps {
  const unpriced: PricingGaps['unpriced'] = [];
  const partial = new Map<string, PricingGaps['partial'][number]>();
  for (const r of rows) {
    if (r.price_source.startsWith('unpriced: ')) {
      unpriced.push({
        provider: r.provider,
        model: r.model,
        reason: r.price_source.slice('unpriced: '.length),
        requests: r.requests,
      });
      continue;
    }
    for (const [fee, count] of missingFees(r.price_source)) {
      const key = `${r.provider}\u0000${r.model ?? ''}\u0000${fee}`;
      const entry = partial.get(key) ?? { provider: r.provider, model: r.model, fee, requests: 0, uses: 0 };
      entry.requests += r.requests;
      entry.uses += count * r.requests;
      partial.set(key, entry);
    }
  }
  const byRequests = (a: { requests: number }, b: { requests: number }) => b.requests - a.requests;
  return {
    from,
    to,
    price_library: PRICE_SOURCE,
    unpriced: unpriced.sort(byRequests),
    partial: [...partial.values()].sort(byRequests),
  };
}

export function formatPricingGaps(g: PricingGaps): string {
  const lines = [`pricing gaps from ${g.from} to ${g.to} (keyrelay prices with ${g.price_library})`];
  if (g.unpriced.length === 0 && g.partial.length === 0) lines.push('every billed call was priced in full');
  if (g.unpriced.length > 0) {
    lines.push('unpriced (cost unknown):');
    for (const u of g.unpriced)
      lines.push(
        `  ${u.provider.padEnd(10)} ${(u.model ?? '-').padEnd(32)} ${String(u.requests).padStart(8)} requests  ${u.reason}`,
      );
  }
  if (g.partial.length > 0) {
    lines.push('partial (a fee without a price left out of the cost):');
    for (const p of g.partial)
      lines.push(
        `  ${p.provider.padEnd(10)} ${(p.model ?? '-').padEnd(32)} ${p.fee.padEnd(28)} ` +
          `${String(p.requests).padStart(8)} requests ${String(p.uses).padStart(8)} uses`,
      );
  }
  return lines.join('\n');
}
