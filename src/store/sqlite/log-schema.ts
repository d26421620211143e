import { createUsageRollup } from './usage-rollup.js';
import { rebuildTable, type Migration } from './db.js';

/** STRICT + CHECKs make a malformed row fail on its own, so insertBatch can skip it and keep the rest. */
export const LOG_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'requests',
    sql: `
      CREATE TABLE requests (
        id TEXT PRIMARY KEY NOT NULL,
        created_at TEXT NOT NULL,
        key_id TEXT NOT NULL,
        account_id TEXT NOT NULL,
        provider TEXT NOT NULL CHECK (provider IN ('openai', 'anthropic')),
        method TEXT NOT NULL,
        path TEXT NOT NULL,
        model TEXT,
        stream INTEGER NOT NULL CHECK (stream IN (0, 1)),
        status INTEGER NOT NULL,
        outcome TEXT NOT NULL
          CHECK (outcome IN ('ok', 'upstream_error', 'client_aborted', 'timeout', 'refused')),
        error_code TEXT,
        latency_ms REAL NOT NULL,
        ttfb_ms REAL,
        input_tokens INTEGER,
        cache_read_tokens INTEGER,
        cache_write_tokens INTEGER,
        output_tokens INTEGER,
        reasoning_tokens INTEGER,
        usage_source TEXT NOT NULL CHECK (usage_source IN ('provider', 'estimated', 'partial', 'none')),
        cost_usd REAL,
        price_source TEXT,
        end_user TEXT,
        session TEXT,
        properties TEXT NOT NULL CHECK (json_valid(properties)),
        request_bytes INTEGER NOT NULL,
        response_bytes INTEGER NOT NULL,
        request_headers TEXT NOT NULL CHECK (json_valid(request_headers)),
        response_headers TEXT NOT NULL CHECK (json_valid(response_headers)),
        request_body TEXT,
        response_body TEXT,
        request_body_truncated INTEGER NOT NULL CHECK (request_body_truncated IN (0, 1)),
        response_body_truncated INTEGER NOT NULL CHECK (response_body_truncated IN (0, 1)),
        client_ip TEXT,
        user_agent TEXT,
        credential_fingerprint TEXT
      ) STRICT;
      CREATE INDEX requests_account_id ON requests(account_id, id);
      CREATE INDEX requests_account_created ON requests(account_id, created_at);
      CREATE INDEX requests_key ON requests(key_id);
      CREATE INDEX requests_created ON requests(created_at);
      -- Only rows that still hold a body: pruning bodies never rescans rows already stripped.
      CREATE INDEX requests_with_body ON requests(created_at)
        WHERE request_body IS NOT NULL OR response_body IS NOT NULL;
    `,
  },
  {
    version: 2,
    name: 'websocket columns',
    sql: `
      ALTER TABLE requests ADD COLUMN connection_id TEXT;
      ALTER TABLE requests ADD COLUMN input_audio_tokens INTEGER;
      ALTER TABLE requests ADD COLUMN cache_read_audio_tokens INTEGER;
      ALTER TABLE requests ADD COLUMN output_audio_tokens INTEGER;
      ALTER TABLE requests ADD COLUMN ws_messages_in INTEGER;
      ALTER TABLE requests ADD COLUMN ws_messages_out INTEGER;
      ALTER TABLE requests ADD COLUMN ws_close_code INTEGER;
      ALTER TABLE requests ADD COLUMN ws_close_reason TEXT;
      CREATE INDEX requests_connection ON requests(connection_id) WHERE connection_id IS NOT NULL;
    `,
  },
  {
    version: 3,
    name: 'requests.error_message',
    // Why keyrelay refused or failed a request, in the words the caller got; older rows keep NULL.
    sql: `ALTER TABLE requests ADD COLUMN error_message TEXT;`,
  },
  {
    version: 4,
    name: 'requests_fts',
    // Full-text search (FTS5, external content: the text lives once, in requests). Triggers keep it in step
    // with inserts, retention deletes and body pruning; 'rebuild' indexes the rows already there.
    sql: `
      CREATE VIRTUAL TABLE requests_fts USING fts5(
        model, path, end_user, session, request_body, response_body,
        content = 'requests', content_rowid = 'rowid', tokenize = 'unicode61 remove_diacritics 2'
      );
      CREATE TRIGGER requests_fts_insert AFTER INSERT ON requests BEGIN
        INSERT INTO requests_fts (rowid, model, path, end_user, session, request_body, response_body)
        VALUES (new.rowid, new.model, new.path, new.end_user, new.session, new.request_body, new.response_body);
      END;
      CREATE TRIGGER requests_fts_delete AFTER DELETE ON requests BEGIN
        INSERT INTO requests_fts (requests_fts, rowid, model, path, end_user, session, request_body, response_body)
        VALUES ('delete', old.rowid, old.model, old.path, old.end_user, old.session, old.request_body, old.response_body);
      END;
      CREATE TRIGGER requests_fts_update AFTER UPDATE ON requests BEGIN
        INSERT INTO requests_fts (requests_fts, rowid, model, path, end_user, session, request_body, response_body)
        VALUES ('delete', old.rowid, old.model, old.path, old.end_user, old.session, old.request_body, old.response_body);
        INSERT INTO requests_fts (rowid, model, path, end_user, session, request_body, response_body)
        VALUES (new.rowid, new.model, new.path, new.end_user, new.session, new.request_body, new.response_body);
      END;
      INSERT INTO requests_fts (requests_fts) VALUES ('rebuild');
    `,
  },
  {
    version: 5,
    name: 'batches',
    // Batches seen through keyrelay and the one-time record of their results' cost.
    sql: `
      CREATE TABLE batches (
        provider TEXT NOT NULL CHECK (provider IN ('openai', 'anthropic')),
        batch_id TEXT NOT NULL,
        key_id TEXT NOT NULL,
        account_id TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        created_here INTEGER NOT NULL CHECK (created_here IN (0, 1)),
        status TEXT,
        request_counts TEXT NOT NULL CHECK (json_valid(request_counts)),
        output_file_id TEXT,
        results_cost_usd REAL,
        results_succeeded INTEGER,
        results_unpriced INTEGER,
        results_broken INTEGER,
        results_request_id TEXT,
        results_fetched_at TEXT,
        PRIMARY KEY (provider, batch_id)
      ) STRICT;
      CREATE INDEX batches_account ON batches(account_id, created_at);
      CREATE INDEX batches_output_file ON batches(provider, output_file_id) WHERE output_file_id IS NOT NULL;
    `,
  },
  {
    version: 6,
    name: 'requests.response_search_text',
    // What search reads of a streamed response instead of its SSE frames, which split words across events
    // and cost the index ~20 times the text (RequestLogRow.response_search_text). Older rows keep NULL:
    // search reads their bodies, as it indexed them.
    sql: `ALTER TABLE requests ADD COLUMN response_search_text TEXT;`,
  },
  {
    version: 7,
    name: 'requests: time ranges by id',
    // A row's id starts with its time, so the (account_id, id) index answers the console's time ranges and
    // the primary key retention's (log-query.ts, ID_TIME_SLACK_MS): the two created_at indexes cost every
    // insert ~1.8 of ~19 µs a row on the log writer (SQLite alone, one core) and ~85 bytes a row on
    // disk, and were used for nothing else. The key's index takes the id too, so a budget's spend reads its
    // period, not the key's whole history (1,000,000 rows: 12 ms for a day, where it read 320). Building it
    // reads every row once (~1 s a million). Rows are kept.
    sql: `
      DROP INDEX IF EXISTS requests_account_created;
      DROP INDEX IF EXISTS requests_created;
      DROP INDEX IF EXISTS requests_key;
      CREATE INDEX requests_key_id ON requests(key_id, id);
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
        key_id TEXT NOT NULL,
        hour TEXT NOT NULL,
        cost_nanos INTEGER NOT NULL,
        PRIMARY KEY (key_id, hour)
      ) STRICT, WITHOUT ROWID;
    `,
  },
  {
    version: 9,
    name: 'batches by account',
    // A batch id is the provider's, and two accounts may hold keys on one provider organization: each
    // account's ledger of a batch is its own (who created it, its results' cost, the download that counted
    // it). Existing rows keep the account of the key that first showed them. SQLite cannot change a primary
    // key in place: the table is copied.
    sql: `
      CREATE TABLE batches_by_account (
        provider TEXT NOT NULL CHECK (provider IN ('openai', 'anthropic')),
        batch_id TEXT NOT NULL,
        key_id TEXT NOT NULL,
        account_id TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        created_here INTEGER NOT NULL CHECK (created_here IN (0, 1)),
        status TEXT,
        request_counts TEXT NOT NULL CHECK (json_valid(request_counts)),
        output_file_id TEXT,
        results_cost_usd REAL,
        results_succeeded INTEGER,
        results_unpriced INTEGER,
        results_broken INTEGER,
        results_request_id TEXT,
        results_fetched_at TEXT,
        PRIMARY KEY (account_id, provider, batch_id)
      ) STRICT;
      INSERT INTO batches_by_account SELECT provider, batch_id, key_id, account_id, created_at, updated_at,
        created_here, status, request_counts, output_file_id, results_cost_usd, results_succeeded,
        results_unpriced, results_broken, results_request_id, results_fetched_at FROM batches;
      DROP TABLE batches;
      ALTER TABLE batches_by_account RENAME TO batches;
      CREATE INDEX batches_account ON batches(account_id, created_at);
      CREATE INDEX batches_output_file ON batches(account_id, provider, output_file_id)
        WHERE output_file_id IS NOT NULL;
    `,
  },
  {
    version: 10,
    name: 'providers_from_registry',
    // The provider list is the registry's (src/providers/index.ts): the tables stop restating it, so a new
    // provider needs no migration. Rows are checked against the registry where they are encoded.
    apply: (db) => {
      for (const table of ['requests', 'batches'])
        rebuildTable(db, table, (sql) => sql.replace(PROVIDER_CHECK, ''));
    },
  },
  {
    version: 11,
    name: 'requests.tool_uses',
    // Server-side tool uses billed apart from tokens (RequestLogRow.tool_uses), kept per row so a later price
    // can be applied to the counts. Older rows keep NULL: none were counted.
    sql: `ALTER TABLE requests ADD COLUMN tool_uses TEXT CHECK (tool_uses IS NULL OR json_valid(tool_uses));`,
  },
  {
    version: 12,
    name: 'requests by key and end user',
    // A key's caps per end user read each end user's spend in the period (LogStore.spendSince).
    sql: `CREATE INDEX requests_key_end_user ON requests(key_id, end_user, id) WHERE end_user IS NOT NULL;`,
  },
  {
    version: 13,
    name: 'requests by organization',
    // Every account's personal organization has the account's id (config migration 5), so each existing row
    // belongs to the organization its account_id names. The full-text index's update trigger is set aside
    // while the column is filled: no indexed column changes, and it would re-index every row.
    apply: (db) => {
      const trigger = db
        .prepare<[], { sql: string }>(
          "SELECT sql FROM sqlite_schema WHERE type = 'trigger' AND name = 'requests_fts_update'",
        )
        .get();
      db.exec('ALTER TABLE requests ADD COLUMN org_id TEXT');
      if (trigger) db.exec('DROP TRIGGER requests_fts_update');
      db.exec('UPDATE requests SET org_id = account_id');
      if (trigger) db.exec(trigger.sql);
      db.exec('CREATE INDEX requests_org_id ON requests(org_id, id)');
    },
  },
  {
    version: 14,
    name: 'request list sorted by cost, tokens, latency',
    // The console's sortable columns (LogStore.listRequests' sort): each in the organization's rows, in the
    // order a page reads them (unpriced costs last), so a page is an index range, not a sort of every row
    // (cost: dearest first; cheapest first sorts within each run of its NULL flag).
    sql: `
      CREATE INDEX requests_org_cost ON requests(org_id, (cost_usd IS NULL) DESC, cost_usd, id);
      CREATE INDEX requests_org_tokens ON requests(org_id, (coalesce(input_tokens, 0) + coalesce(output_tokens, 0)), id);
      CREATE INDEX requests_org_latency ON requests(org_id, latency_ms, id);
    `,
  },
  {
    version: 15,
    name: 'requests by session',
    // A session's calls in order (LogStore.sessionCalls) are one index range of the organization's rows;
    // only rows with a session are in it, so a log without sessions pays nothing on insert.
    sql: `CREATE INDEX requests_org_session ON requests(org_id, session, id) WHERE session IS NOT NULL;`,
  },
  {
    version: 16,
    name: 'requests by end user',
    // One end user's rows in the organization, newest first (the end-user view and its
    // series): an index range. Without it a page read the organization's rows newest
    // first until it found 50 of that end user's (1,000,000 rows, 5,000 end users: ~0.8 s a page, ~2 s a
    // month's series). Only rows that name one; a session's rows are migration 15's index.
    sql: `
      CREATE INDEX requests_org_end_user ON requests(org_id, end_user, id) WHERE end_user IS NOT NULL;
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
      CREATE INDEX requests_org_session_page ON requests(org_id, session, id, created_at, end_user)
        WHERE session IS NOT NULL;
      DROP INDEX requests_org_session;
    `,
  },
  {
    version: 19,
    name: 'daily usage rollup',
    // A month's series or breakdown read 1,000,000 rows (1.3-1.5 s); the rollup holds a few thousand rows a
    // month instead (../usage-rollup.ts). Created empty: rows already logged are added after start, a day at a
    // time (LogStore.fillUsageRollup), so an upgrade never waits on them.
    apply: createUsageRollup,
  },
];

const PROVIDER_CHECK = /\s*CHECK \(provider IN \([^)]*\)\)/;
