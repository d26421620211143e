import type { LogColumn } from '../log-query.js';
import type { PgMigration } from './db.js';
import { usageRollupMigrationSql } from './usage-rollup.js';

/**
 * One plain table rather than monthly partitions: partitioning would force the primary key to include
 * created_at (so ON CONFLICT (id) no longer dedupes on id alone) and need partitions created ahead of time.
 * Retention instead deletes in chunks, oldest first, through the primary key (an id starts with its time),
 * which stays fast at tens of millions of rows. ids are COLLATE "C" so their order is byte order, i.e.
 * arrival order, whatever the database locale.
 */
export const LOG_MIGRATIONS: readonly PgMigration[] = [
  {
    version: 1,
    name: 'requests',
    sql: `
      CREATE TABLE requests (
        id text COLLATE "C" PRIMARY KEY,
        created_at timestamptz NOT NULL,
        key_id text NOT NULL,
        account_id text NOT NULL,
        provider text NOT NULL CHECK (provider IN ('openai', 'anthropic')),
        method text NOT NULL,
        path text NOT NULL,
        model text,
        stream boolean NOT NULL,
        status integer NOT NULL,
        outcome text NOT NULL
          CHECK (outcome IN ('ok', 'upstream_error', 'client_aborted', 'timeout', 'refused')),
        error_code text,
        latency_ms double precision NOT NULL,
        ttfb_ms double precision,
        input_tokens bigint,
        cache_read_tokens bigint,
        cache_write_tokens bigint,
        output_tokens bigint,
        reasoning_tokens bigint,
        usage_source text NOT NULL CHECK (usage_source IN ('provider', 'estimated', 'partial', 'none')),
        cost_usd double precision,
        price_source text,
        end_user text,
        session text,
        properties jsonb NOT NULL,
        request_bytes bigint NOT NULL,
        response_bytes bigint NOT NULL,
        request_headers jsonb NOT NULL,
        response_headers jsonb NOT NULL,
        request_body text,
        response_body text,
        request_body_truncated boolean NOT NULL,
        response_body_truncated boolean NOT NULL,
        client_ip text,
        user_agent text,
        credential_fingerprint text
      );
      CREATE INDEX requests_account_id ON requests (account_id, id);
      CREATE INDEX requests_account_created ON requests (account_id, created_at);
      CREATE INDEX requests_key ON requests (key_id);
      CREATE INDEX requests_created ON requests (created_at);
      -- Only rows that still hold a body: pruning bodies never rescans rows already stripped.
      CREATE INDEX requests_with_body ON requests (created_at)
        WHERE request_body IS NOT NULL OR response_body IS NOT NULL;
    `,
  },
  {
    version: 2,
    name: 'websocket columns',
    sql: `
      ALTER TABLE requests ADD COLUMN connection_id text COLLATE "C";
      ALTER TABLE requests ADD COLUMN input_audio_tokens bigint;
      ALTER TABLE requests ADD COLUMN cache_read_audio_tokens bigint;
      ALTER TABLE requests ADD COLUMN output_audio_tokens bigint;
      ALTER TABLE requests ADD COLUMN ws_messages_in bigint;
      ALTER TABLE requests ADD COLUMN ws_messages_out bigint;
      ALTER TABLE requests ADD COLUMN ws_close_code integer;
      ALTER TABLE requests ADD COLUMN ws_close_reason text;
      CREATE INDEX requests_connection ON requests (connection_id) WHERE connection_id IS NOT NULL;
    `,
  },
  {
    version: 3,
    name: 'requests.error_message',
    // Why keyrelay refused or failed a request, in the words the caller got; older rows keep NULL.
    sql: `ALTER TABLE requests ADD COLUMN error_message text;`,
  },
  {
    version: 4,
    name: 'requests.search_vector',
    // Full-text search: a stored tsvector ('simple': no stemming, any language) over the searchable text,
    // computed for the rows already there by this ALTER and for each new row on insert; GIN-indexed.
    // Punctuation becomes spaces first, so words split as SQLite's FTS5 splits them (PostgreSQL's parser would
    // keep paths, emails and URLs whole). Bodies count up to 256 KB each, inside tsvector's 1 MB limit.
    sql: `
      ALTER TABLE requests ADD COLUMN search_vector tsvector GENERATED ALWAYS AS (
        to_tsvector('simple'::regconfig, regexp_replace(
          coalesce(model, '') || ' ' || path || ' ' || coalesce(end_user, '') || ' ' || coalesce(session, '') || ' ' ||
          left(coalesce(request_body, ''), 262144) || ' ' || left(coalesce(response_body, ''), 262144),
          '[^[:alnum:]]+', ' ', 'g'))
      ) STORED;
      CREATE INDEX requests_search ON requests USING gin (search_vector);
    `,
  },
  {
    version: 5,
    name: 'batches',
    // Batches seen through keyrelay and the one-time record of their results' cost.
    sql: `
      CREATE TABLE batches (
        provider text NOT NULL CHECK (provider IN ('openai', 'anthropic')),
        batch_id text COLLATE "C" NOT NULL,
        key_id text NOT NULL,
        account_id text NOT NULL,
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL,
        created_here boolean NOT NULL,
        status text,
        request_counts jsonb NOT NULL,
        output_file_id text COLLATE "C",
        results_cost_usd double precision,
        results_succeeded bigint,
        results_unpriced bigint,
        results_broken bigint,
        results_request_id text,
        results_fetched_at timestamptz,
        PRIMARY KEY (provider, batch_id)
      );
      CREATE INDEX batches_account ON batches (account_id, created_at);
      CREATE INDEX batches_output_file ON batches (provider, output_file_id) WHERE output_file_id IS NOT NULL;
    `,
  },
  {
    version: 6,
    name: 'requests.response_search_text',
    // What search reads of a streamed response instead of its SSE frames, which split words across events
    // and cost the index ~20 times the text (RequestLogRow.response_search_text). Older rows keep NULL:
    // search reads their bodies, as it indexed them.
    sql: `ALTER TABLE requests ADD COLUMN response_search_text text;`,
  },
  {
    version: 7,
    name: 'requests: time ranges by id',
    // A row's id starts with its time, so the (account_id, id) index answers the console's time ranges and
    // the primary key retention's (log-query.ts, ID_TIME_SLACK_MS): the two created_at indexes cost every
    // insert ~1.8 of ~19 µs a row on the log writer (measured on SQLite) and ~85 bytes a row on
    // disk, and were used for nothing else. The key's index takes the id too, so a budget's spend reads its
    // period, not the key's whole history (1,000,000 rows: 12 ms for a day, where it read 320). Building it
    // reads every row once (~1 s a million). Rows are kept.
    sql: `
      DROP INDEX IF EXISTS requests_account_created;
      DROP INDEX IF EXISTS requests_created;
      DROP INDEX IF EXISTS requests_key;
      CREATE INDEX requests_key_id ON requests (key_id, id);
    `,
  },
  {
    version: 8,
    name: 'key_spend',
    // Budgets read a key's spend so far from its rows; with the request log off there are none, and a
    // restart forgot what keys spent. Their cost is kept here instead, one row a key and an hour
    // (LogStore.addSpend), in exact nanodollars.
    sql: `
      CREATE TABLE key_spend (
        key_id text NOT NULL,
        hour timestamptz NOT NULL,
        cost_nanos bigint NOT NULL,
        PRIMARY KEY (key_id, hour)
      );
    `,
  },
  {
    version: 9,
    name: 'batches by account',
    // A batch id is the provider's, and two accounts may hold keys on one provider organization: each
    // account's ledger of a batch is its own (who created it, its results' cost, the download that counted
    // it). Existing rows keep the account of the key that first showed them.
    sql: `
      ALTER TABLE batches DROP CONSTRAINT batches_pkey;
      ALTER TABLE batches ADD PRIMARY KEY (account_id, provider, batch_id);
      DROP INDEX batches_output_file;
      CREATE INDEX batches_output_file ON batches (account_id, provider, output_file_id)
        WHERE output_file_id IS NOT NULL;
    `,
  },
  {
    version: 10,
    name: 'providers_from_registry',
    // The provider list is the registry's (src/providers/index.ts): the tables stop restating it, so a new
    // provider needs no migration.
    sql: `
      ALTER TABLE requests DROP CONSTRAINT IF EXISTS requests_provider_check;
      ALTER TABLE batches DROP CONSTRAINT IF EXISTS batches_provider_check;
    `,
  },
  {
    version: 11,
    name: 'requests.tool_uses',
    // Server-side tool uses billed apart from tokens (RequestLogRow.tool_uses), kept per row so a later price
    // can be applied to the counts. Older rows keep NULL: none were counted.
    sql: `ALTER TABLE requests ADD COLUMN tool_uses jsonb;`,
  },
  {
    version: 12,
    name: 'requests by key and end user',
    // A key's caps per end user read each end user's spend in the period (LogStore.spendSince).
    sql: `CREATE INDEX requests_key_end_user ON requests (key_id, end_user, id) WHERE end_user IS NOT NULL;`,
  },
  {
    version: 13,
    name: 'requests by organization',
    // Every account's personal organization has the account's id (config migration 5), so each existing row
    // belongs to the organization its account_id names.
    sql: `
      ALTER TABLE requests ADD COLUMN org_id text;
      UPDATE requests SET org_id = account_id;
      CREATE INDEX requests_org_id ON requests (org_id, id);
    `,
  },
  {
    version: 14,
    name: 'request list sorted by cost, tokens, latency',
    // The console's sortable columns (LogStore.listRequests' sort): each in the organization's rows, in the
    // order a page reads them (unpriced costs last), so a page is an index range, not a sort of every row
    // (cost: dearest first; cheapest first sorts within each run of its NULL flag).
    sql: `
      CREATE INDEX requests_org_cost ON requests (org_id, (cost_usd IS NULL) DESC, cost_usd, id);
      CREATE INDEX requests_org_tokens ON requests (org_id, (coalesce(input_tokens, 0) + coalesce(output_tokens, 0)), id);
      CREATE INDEX requests_org_latency ON requests (org_id, latency_ms, id);
    `,
  },
  {
    version: 15,
    name: 'requests by session',
    // A session's calls in order (LogStore.sessionCalls) are one index range of the organization's rows;
    // only rows with a session are in it, so a log without sessions pays nothing on insert.
    sql: `CREATE INDEX requests_org_session ON requests (org_id, session, id) WHERE session IS NOT NULL;`,
  },
  {
    version: 16,
    name: 'requests by end user',
    // One end user's rows in the organization, newest first (the end-user view and its
    // series): an index range, not the organization's rows read newest first until 50 of
    // theirs turn up. Only rows that name one; a session's rows are migration 15's index.
    sql: `
      CREATE INDEX requests_org_end_user ON requests (org_id, end_user, id) WHERE end_user IS NOT NULL;
    `,
  },
  {
    version: 18,
    name: 'session list from the index',
    // The session list picks its page by each session's first row in range (LogStore.listSessions): with the
    // time filter's column in the index that step never reads the table, and only the page's sessions are
    // summed; end_user lets an end user's list skip other users' rows without the table too. It starts with
    // 15's columns, so it also serves a session's calls, and replaces it.
    sql: `
      CREATE INDEX requests_org_session_page ON requests (org_id, session, id) INCLUDE (created_at, end_user)
        WHERE session IS NOT NULL;
      DROP INDEX requests_org_session;
    `,
  },
  {
    version: 19,
    name: 'daily usage rollup',
    // A month's series or breakdown read 1,000,000 rows (1.6-1.7 s); the rollup holds a few thousand rows a
    // month instead (../usage-rollup.ts). Created empty: rows already logged are added after start, a day at a
    // time (LogStore.fillUsageRollup), so an upgrade never waits on them.
    sql: usageRollupMigrationSql(),
  },
];

/** Column → SQL array type for the unnest() insert. */
export const PG_COLUMN_TYPES = {
  id: 'text',
  created_at: 'timestamptz',
  key_id: 'text',
  account_id: 'text',
  org_id: 'text',
  provider: 'text',
  method: 'text',
  path: 'text',
  model: 'text',
  stream: 'boolean',
  status: 'integer',
  outcome: 'text',
  error_code: 'text',
  latency_ms: 'double precision',
  ttfb_ms: 'double precision',
  input_tokens: 'bigint',
  cache_read_tokens: 'bigint',
  cache_write_tokens: 'bigint',
  output_tokens: 'bigint',
  reasoning_tokens: 'bigint',
  usage_source: 'text',
  cost_usd: 'double precision',
  price_source: 'text',
  end_user: 'text',
  session: 'text',
  properties: 'jsonb',
  request_bytes: 'bigint',
  response_bytes: 'bigint',
  request_headers: 'jsonb',
  response_headers: 'jsonb',
  request_body: 'text',
  response_body: 'text',
  request_body_truncated: 'boolean',
  response_body_truncated: 'boolean',
  client_ip: 'text',
  user_agent: 'text',
  credential_fingerprint: 'text',
  connection_id: 'text',
  input_audio_tokens: 'bigint',
  cache_read_audio_tokens: 'bigint',
  output_audio_tokens: 'bigint',
  ws_messages_in: 'bigint',
  ws_messages_out: 'bigint',
  ws_close_code: 'integer',
  ws_close_reason: 'text',
  error_message: 'text',
  response_search_text: 'text',
  tool_uses: 'jsonb',
} as const satisfies Record<LogColumn, string>;

/** bigint comes back from pg as a string; the interface speaks numbers. */
export const BIGINT_COLUMNS = [
  'input_tokens',
  'cache_read_tokens',
  'cache_write_tokens',
  'output_tokens',
  'reasoning_tokens',
  'request_bytes',
  'response_bytes',
  'input_audio_tokens',
  'cache_read_audio_tokens',
  'output_audio_tokens',
  'ws_messages_in',
  'ws_messages_out',
] as const;
