/**
 * The hourly usage rollup on PostgreSQL (../rollup.ts): its table, and the upsert that adds rows to it,
 * written as a statement over any relation of request rows: the table itself (the backfill) or the rows an
 * insert just returned (so a batch and its rollup are one statement).
 */
import { AGGREGATE_SQL } from '../log-query.js';
import { PG_LATENCY_BUCKET_SQL, ROLLUP_DIMS, ROLLUP_SUMS } from '../rollup.js';

const KEY = ['org_id', 'hour', ...ROLLUP_DIMS.slice(1)] as const;
const KEY_POSITIONS = KEY.map((_, i) => i + 1).join(', ');

/** The request columns the rollup reads (what an insert returns for it). */
export const ROLLUP_SOURCE_COLUMNS = [
  ...ROLLUP_DIMS,
  'created_at',
  'latency_ms',
  'status',
  'outcome',
  'input_tokens',
  'output_tokens',
  'cache_read_tokens',
  'cost_usd',
  'price_source',
].join(', ');

/**
 * Adds the rows of `source` to the rollup: grouped by rollup row and latency bucket (AGGREGATE_SQL's sums),
 * then by rollup row with its histogram. In key order, so two instances upserting the same rollup rows lock
 * them in the same order and never deadlock; a histogram already stored is merged with the new one.
 */
export function rollupUpsertSql(source: string): string {
  return `INSERT INTO usage_hourly (${[...KEY, ...ROLLUP_SUMS, 'latency'].join(', ')})
    SELECT ${KEY.join(', ')}, ${ROLLUP_SUMS.map((c) => `SUM(${c})`).join(', ')},
      string_agg(concat(lb, ':', requests), ',' ORDER BY lb)
    FROM (
      SELECT COALESCE(org_id, '') AS org_id, date_trunc('hour', created_at, 'UTC') AS hour, account_id, key_id,
        provider, COALESCE(model, '') AS model, COALESCE(credential_fingerprint, '') AS credential_fingerprint,
        ${PG_LATENCY_BUCKET_SQL} AS lb, ${AGGREGATE_SQL}
      FROM ${source} GROUP BY ${KEY_POSITIONS}, 8
    ) by_bucket
    GROUP BY ${KEY_POSITIONS} ORDER BY ${KEY_POSITIONS}
    ON CONFLICT (${KEY.join(', ')}) DO UPDATE SET
      ${ROLLUP_SUMS.map((c) => `${c} = usage_hourly.${c} + excluded.${c}`).join(', ')},
      latency = usage_latency_merge(usage_hourly.latency, excluded.latency)`;
}

/** Log migration 19: the table, its histogram merge, and the rows already logged added to it. */
export const ROLLUP_MIGRATION_SQL = `
  CREATE TABLE usage_hourly (
    org_id text NOT NULL,
    hour timestamptz NOT NULL,
    account_id text NOT NULL,
    key_id text NOT NULL,
    provider text NOT NULL,
    model text NOT NULL,
    credential_fingerprint text NOT NULL,
    requests bigint NOT NULL,
    errors bigint NOT NULL,
    input_tokens bigint NOT NULL,
    output_tokens bigint NOT NULL,
    cache_read_tokens bigint NOT NULL,
    cost_usd double precision NOT NULL,
    unknown_cost_requests bigint NOT NULL,
    partial_cost_requests bigint NOT NULL,
    latency text NOT NULL,
    PRIMARY KEY (${KEY.join(', ')})
  );
  CREATE INDEX usage_hourly_account ON usage_hourly (account_id, hour);
  CREATE INDEX usage_hourly_key ON usage_hourly (key_id, hour);
  -- Two histograms' bucket:count pairs, summed by bucket, in bucket order.
  CREATE FUNCTION usage_latency_merge(a text, b text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT string_agg(concat(k, ':', n), ',' ORDER BY k) FROM (
      SELECT split_part(e, ':', 1)::integer AS k, sum(split_part(e, ':', 2)::bigint) AS n
      FROM unnest(string_to_array(a, ',') || string_to_array(b, ',')) AS e GROUP BY 1
    ) merged
  $$;
  ${rollupUpsertSql('requests')};
`;
