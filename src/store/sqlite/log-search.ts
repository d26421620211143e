/**
 * The request log's full-text index on SQLite, as KEYRELAY_LOG_SEARCH and KEYRELAY_LOG_SEARCH_BODY_CHARS ask:
 * applied at start (SqliteLogStore.migrate), after the numbered migrations. Migration v4 created the first
 * index; from then on the wanted index is described here and compared with what the file holds.
 *
 * Why it looks like this (per row on the writer thread, `npx tsx bench/log-insert.ts`, docs/performance.md):
 * tokenising is the cost, so
 * - `detail = none`: the index records which rows hold a word, not where (no phrase, NEAR or column queries,
 *   which search never sends: every word is matched on its own, anywhere in the row). ~25 % of the index's
 *   cost per row.
 * - `columnsize = 0`: no per-row token counts (they only serve bm25 ranking; results are ordered by id).
 * - each body counts up to `bodyChars` characters: its first half and its last half (a chat request's newest
 *   message is at its end, a stream's usage and finish at the end of the response).
 * External content: the text lives once, in `requests`; the triggers keep the index in step with inserts,
 * retention deletes and body pruning, passing the same capped text on delete as on insert (FTS5 removes
 * exactly the words it is given). The index is refilled with INSERT … SELECT rather than 'rebuild', which
 * would read the bodies uncapped.
 */
import type { Db } from './db.js';

export interface LogSearchSettings {
  /** false: no index, no triggers (cheaper writes); search scans the newest rows instead. */
  enabled: boolean;
  /** Characters of each body the index reads (half from the start, half from the end); 0 = none. */
  bodyChars: number;
}

export const DEFAULT_LOG_SEARCH: LogSearchSettings = { enabled: true, bodyChars: 8192 };

const COLUMNS = 'model, path, end_user, session, request_body, response_body';

/** SQL for the indexed part of a body column: all of it when short, else its head and tail. */
export function cappedBody(column: string, bodyChars: number): string {
  if (bodyChars <= 0) return 'NULL';
  const head = Math.ceil(bodyChars / 2);
  const tail = Math.floor(bodyChars / 2);
  const tailSql = tail > 0 ? ` || ' ' || substr(${column}, -${tail})` : '';
  return `CASE WHEN length(${column}) <= ${bodyChars} THEN ${column} ELSE substr(${column}, 1, ${head})${tailSql} END`;
}

function values(prefix: 'new' | 'old', bodyChars: number): string {
  return (
    `${prefix}.rowid, ${prefix}.model, ${prefix}.path, ${prefix}.end_user, ${prefix}.session, ` +
    `${cappedBody(`${prefix}.request_body`, bodyChars)}, ${cappedBody(`${prefix}.response_body`, bodyChars)}`
  );
}

/** The schema objects of the index, each as SQLite keeps its text in sqlite_master. */
function wanted(bodyChars: number): { name: string; sql: string }[] {
  return [
    {
      name: 'requests_fts',
      sql:
        `CREATE VIRTUAL TABLE requests_fts USING fts5(${COLUMNS}, content = 'requests', ` +
        `content_rowid = 'rowid', tokenize = 'unicode61 remove_diacritics 2', detail = none, columnsize = 0)`,
    },
    {
      name: 'requests_fts_insert',
      sql:
        `CREATE TRIGGER requests_fts_insert AFTER INSERT ON requests BEGIN ` +
        `INSERT INTO requests_fts (rowid, ${COLUMNS}) VALUES (${values('new', bodyChars)}); END`,
    },
    {
      name: 'requests_fts_delete',
      sql:
        `CREATE TRIGGER requests_fts_delete AFTER DELETE ON requests BEGIN ` +
        `INSERT INTO requests_fts (requests_fts, rowid, ${COLUMNS}) ` +
        `VALUES ('delete', ${values('old', bodyChars)}); END`,
    },
    {
      name: 'requests_fts_update',
      sql:
        `CREATE TRIGGER requests_fts_update AFTER UPDATE ON requests BEGIN ` +
        `INSERT INTO requests_fts (requests_fts, rowid, ${COLUMNS}) ` +
        `VALUES ('delete', ${values('old', bodyChars)}); ` +
        `INSERT INTO requests_fts (rowid, ${COLUMNS}) VALUES (${values('new', bodyChars)}); END`,
    },
  ];
}

const DROP = `
  DROP TRIGGER IF EXISTS requests_fts_insert;
  DROP TRIGGER IF EXISTS requests_fts_delete;
  DROP TRIGGER IF EXISTS requests_fts_update;
  DROP TABLE IF EXISTS requests_fts;
`;

export function hasSearchIndex(db: Db): boolean {
  return (
    db
      .prepare<[], { n: number }>(
        "SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'requests_fts'",
      )
      .get()!.n > 0
  );
}

/**
 * Makes the file's index what the settings ask for. Nothing happens when it already is (the usual start);
 * otherwise the old index and triggers go, and, when enabled, the new ones come and index every row already
 * there (rows themselves are never touched). Returns what it did, for the start-up log.
 */
export function applyLogSearch(db: Db, s: LogSearchSettings): 'unchanged' | 'dropped' | 'rebuilt' {
  const want = s.enabled ? wanted(s.bodyChars) : [];
  return db.transaction(
    () => {
      const have = db
        .prepare<[], { name: string; sql: string }>(
          "SELECT name, sql FROM sqlite_master WHERE name IN ('requests_fts', 'requests_fts_insert', " +
            "'requests_fts_delete', 'requests_fts_update') ORDER BY name",
        )
        .all();
      const same =
        have.length === want.length &&
        [...want]
          .sort((a, b) => (a.name < b.name ? -1 : 1))
          .every((w, i) => have[i]!.name === w.name && have[i]!.sql === w.sql);
      if (same) return 'unchanged';
      db.exec(DROP);
      if (!s.enabled) return 'dropped';
      for (const w of want) db.exec(w.sql);
      db.exec(
        `INSERT INTO requests_fts (rowid, ${COLUMNS}) SELECT rowid, model, path, end_user, session, ` +
          `${cappedBody('request_body', s.bodyChars)}, ${cappedBody('response_body', s.bodyChars)} FROM requests`,
      );
      return 'rebuilt';
    },
    { immediate: true },
  );
}
