/**
 * Reading a provider's own cost report for one UTC day, as each documents it (paging, retries and bounds:
 * admin-fetch.ts):
 * - OpenAI: `GET /v1/organization/costs` (start_time/end_time in Unix seconds, bucket_width=1d,
 *   group_by=line_item; `Authorization: Bearer` admin key). A result's `amount.value` is in the currency's
 *   units; `line_item` reads "<model>, <kind>" for model usage (e.g. "gpt-4o-mini-2024-07-18, input").
 * - Anthropic: `GET /v1/organizations/cost_report` (starting_at/ending_at RFC 3339, bucket_width=1d,
 *   group_by[]=description; `x-api-key` admin key, `anthropic-version`). A result's `amount` is a decimal
 *   string in the currency's lowest units (cents); `model` names the model of token costs.
 */
import type { AdminKeys, BillingProvider } from './admin-keys.js';
import {
  adminHeaders,
  dayBounds,
  DEFAULT_FETCH_BOUNDS,
  isObject,
  readReport,
  ReportError,
  type FetchBounds,
} from './admin-fetch.js';

/** One line of the bill: what the provider charged for a model (or a line item without one) that day. */
export interface BillLine {
  /** The model the line bills, as the provider names it; null for a line not tied to a model. */
  model: string | null;
  /** The provider's own words for the line (OpenAI's line_item, Anthropic's description or cost_type). */
  item: string;
  cost_usd: number;
}

export function fetchCostReport(
  provider: BillingProvider,
  origin: string,
  keys: AdminKeys,
  day: string,
  bounds: FetchBounds = DEFAULT_FETCH_BOUNDS,
): Promise<BillLine[]> {
  const { start, end } = dayBounds(day);
  return readReport(
    {
      provider,
      name: 'cost report',
      request: (key, page) => {
        const url = new URL(
          provider === 'openai' ? '/v1/organization/costs' : '/v1/organizations/cost_report',
          origin,
        );
        if (provider === 'openai') {
          url.searchParams.set('start_time', String(start.getTime() / 1000));
          url.searchParams.set('end_time', String(end.getTime() / 1000));
          url.searchParams.set('bucket_width', '1d');
          url.searchParams.set('group_by', 'line_item');
        } else {
          url.searchParams.set('starting_at', start.toISOString());
          url.searchParams.set('ending_at', end.toISOString());
          url.searchParams.set('bucket_width', '1d');
          url.searchParams.append('group_by[]', 'description');
        }
        if (page !== null) url.searchParams.set('page', page);
        return { url, headers: adminHeaders(provider, key) };
      },
      read: provider === 'openai' ? readOpenaiBuckets : readAnthropicBuckets,
    },
    keys,
    bounds,
  );
}

function readOpenaiBuckets(data: unknown[]): BillLine[] {
  const lines: BillLine[] = [];
  for (const bucket of data) {
    if (!isObject(bucket) || !Array.isArray(bucket.results)) continue;
    for (const r of bucket.results) {
      if (!isObject(r) || !isObject(r.amount)) continue;
      const value = Number(r.amount.value);
      const currency = typeof r.amount.currency === 'string' ? r.amount.currency.toLowerCase() : 'usd';
      if (!Number.isFinite(value)) continue;
      if (currency !== 'usd')
        throw new ReportError(`OpenAI's cost report is in ${currency}; keyrelay compares USD only`);
      const item = typeof r.line_item === 'string' ? r.line_item : 'all usage';
      lines.push({ model: openaiLineModel(item), item, cost_usd: value });
    }
  }
  return lines;
}

/** "gpt-4o-mini-2024-07-18, cached input" → the model; a line item without ", " names no model. */
function openaiLineModel(item: string): string | null {
  const comma = item.lastIndexOf(', ');
  return comma > 0 ? item.slice(0, comma) : null;
}

function readAnthropicBuckets(data: unknown[]): BillLine[] {
  const lines: BillLine[] = [];
  for (const bucket of data) {
    if (!isObject(bucket) || !Array.isArray(bucket.results)) continue;
    for (const r of bucket.results) {
      if (!isObject(r)) continue;
      const cents = Number(r.amount);
      const currency = typeof r.currency === 'string' ? r.currency.toUpperCase() : 'USD';
      if (typeof r.amount !== 'string' || !Number.isFinite(cents)) continue;
      if (currency !== 'USD')
        throw new ReportError(`Anthropic's cost report is in ${currency}; keyrelay compares USD only`);
      const model = typeof r.model === 'string' && r.model !== '' ? r.model : null;
      const item =
        typeof r.description === 'string'
          ? r.description
          : typeof r.cost_type === 'string'
            ? r.cost_type
            : 'all usage';
      lines.push({ model, item, cost_usd: cents / 100 });
    }
  }
  return lines;
}
