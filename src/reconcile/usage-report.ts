/**
 * Reading a provider's own usage (token) report for one UTC day, per model and per API key id, as each
 * documents it (paging, retries and bounds: admin-fetch.ts):
 * - OpenAI's Usage API: `GET /v1/organization/usage/completions` and `/usage/embeddings` (start_time,
 *   end_time Unix seconds, bucket_width=1d, group_by=model&group_by=api_key_id). A completions result has
 *   `input_tokens` (cached ones included), `input_cached_tokens`, `output_tokens`, `num_model_requests`,
 *   `model`, `api_key_id`; an embeddings result `input_tokens` and `num_model_requests`. The images, audio,
 *   moderations and vector-store reports count images, seconds or bytes, not tokens, and are not read.
 * - Anthropic's Usage & Cost Admin API: `GET /v1/organizations/usage_report/messages` (starting_at,
 *   ending_at RFC 3339, bucket_width=1d, group_by[]=model&group_by[]=api_key_id). A result has
 *   `uncached_input_tokens`, `cache_creation.{ephemeral_5m_input_tokens, ephemeral_1h_input_tokens}`,
 *   `cache_read_input_tokens`, `output_tokens`, `model`, `api_key_id` (null for the Console's Workbench),
 *   and no count of requests.
 * Token kinds are read into keyrelay's own convention (SPEC: input counts every prompt token, cache reads
 * and writes included), so the two sides compare field by field.
 */
import type { AdminKeys, BillingProvider } from './admin-keys.js';
import {
  adminHeaders,
  dayBounds,
  DEFAULT_FETCH_BOUNDS,
  isObject,
  readReport,
  type FetchBounds,
} from './admin-fetch.js';

/** One line of a provider's usage report: a model's tokens under one of its API key ids that day. */
export interface UsageLine {
  model: string | null;
  /** The provider's id of the API key (OpenAI "key_…", Anthropic "apikey_…"); null: none (Workbench). */
  api_key_id: string | null;
  /** Calls the provider counted; null where its report does not count them (Anthropic). */
  requests: number | null;
  /** Every prompt token, cache reads and writes included. */
  input_tokens: number;
  cache_read_tokens: number;
  /** Null where the provider's report has no such field (OpenAI). */
  cache_write_tokens: number | null;
  output_tokens: number;
}

/** OpenAI's usage reports that count tokens of calls keyrelay proxies. */
export const OPENAI_USAGE_ENDPOINTS = ['completions', 'embeddings'] as const;

const count = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) ? v : 0);
const idOrNull = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null);

export async function fetchUsageReport(
  provider: BillingProvider,
  origin: string,
  keys: AdminKeys,
  day: string,
  bounds: FetchBounds = DEFAULT_FETCH_BOUNDS,
): Promise<UsageLine[]> {
  const { start, end } = dayBounds(day);
  if (provider === 'anthropic')
    return readReport(
      {
        provider,
        name: 'usage report',
        request: (key, page) => {
          const url = new URL('/v1/organizations/usage_report/messages', origin);
          url.searchParams.set('starting_at', start.toISOString());
          url.searchParams.set('ending_at', end.toISOString());
          url.searchParams.set('bucket_width', '1d');
          url.searchParams.append('group_by[]', 'model');
          url.searchParams.append('group_by[]', 'api_key_id');
          if (page !== null) url.searchParams.set('page', page);
          return { url, headers: adminHeaders(provider, key) };
        },
        read: readAnthropicBuckets,
      },
      keys,
      bounds,
    );
  // One after the other: each is bounded on its own, and the admin API's rate limit is per organization.
  const lines: UsageLine[] = [];
  for (const endpoint of OPENAI_USAGE_ENDPOINTS)
    lines.push(
      ...(await readReport(
        {
          provider,
          name: `usage report (${endpoint})`,
          request: (key, page) => {
            const url = new URL(`/v1/organization/usage/${endpoint}`, origin);
            url.searchParams.set('start_time', String(start.getTime() / 1000));
            url.searchParams.set('end_time', String(end.getTime() / 1000));
            url.searchParams.set('bucket_width', '1d');
            url.searchParams.append('group_by', 'model');
            url.searchParams.append('group_by', 'api_key_id');
            if (page !== null) url.searchParams.set('page', page);
            return { url, headers: adminHeaders(provider, key) };
          },
          read: readOpenaiBuckets,
        },
        keys,
        bounds,
      )),
    );
  return lines;
}

function results(data: unknown[]): Array<Record<string, unknown>> {
  const out: Array<Record<string, unknown>> = [];
  for (const bucket of data) {
    if (!isObject(bucket) || !Array.isArray(bucket.results)) continue;
    for (const r of bucket.results) if (isObject(r)) out.push(r);
  }
  return out;
}

function readOpenaiBuckets(data: unknown[]): UsageLine[] {
  return results(data).map((r) => ({
    model: idOrNull(r.model),
    api_key_id: idOrNull(r.api_key_id),
    requests: count(r.num_model_requests),
    input_tokens: count(r.input_tokens),
    cache_read_tokens: count(r.input_cached_tokens),
    cache_write_tokens: null,
    output_tokens: count(r.output_tokens),
  }));
}

function readAnthropicBuckets(data: unknown[]): UsageLine[] {
  return results(data).map((r) => {
    const creation = isObject(r.cache_creation) ? r.cache_creation : {};
    const write = count(creation.ephemeral_5m_input_tokens) + count(creation.ephemeral_1h_input_tokens);
    const read = count(r.cache_read_input_tokens);
    return {
      model: idOrNull(r.model),
      api_key_id: idOrNull(r.api_key_id),
      requests: null,
      input_tokens: count(r.uncached_input_tokens) + write + read,
      cache_read_tokens: read,
      cache_write_tokens: write,
      output_tokens: count(r.output_tokens),
    };
  });
}
