/**
 * The request log's full-text index on SQLite, as KEYRELAY_LOG_SEARCH and the body limit (bodyChars) ask:
 * applied at start (SqliteLogStore.migrate), after the numbered migrations. Migration v4 created the first
 * index; from then on the wanted index is described here and compared with what the file holds.
 *
 * Why it looks like this (CPU per row on the writer thread, SQLite alone on one core):
 * - New rows are indexed by insertBatch, one INSERT … SELECT per transaction (`indexNewRows`), not by an
 *   insert trigger: FTS5 does per-statement work (it flushes what it holds at each statement's savepoint), so
 *   a trigger, one statement per row, cost ~20 µs a row even for small bodies; a statement per 100 rows ~3 µs.
 * - `detail = none`: the index records which rows hold a word, not where (no phrase, NEAR or column queries,
 *   which search never sends: every word is matched on its own, anywhere in the row). ~25 % less per row.
 * - `columnsize = 0`: no per-row token counts (they only serve bm25 ranking; results are ordered by id).
 * - each body counts up to `bodyChars` characters: its first half and its last half (a chat request's newest
 *   message is at its end, a stream's usage and finish at the end of the response).
 * External content: the text lives once, in `requests`. The capped text comes from one view,
 * `requests_fts_source`, so the writer (which does not know the settings) indexes exactly what the triggers
 * later remove on retention deletes and body pruning (FTS5 removes exactly the words it is given), and the
 * index is refilled from it rather than with 'rebuild', which would read the bodies uncapped.
 */
import type { Db } from './db.js';

export interface LogSearchSettings {
  /** false: no index, no triggers (cheaper writes); search scans the newest rows instead. */
  enabled: boolean;
  /** Characters of each body the index reads (half from the start, half from the end); 0 = none. */
  bodyChars: number;
}

/** 8192: a prompt's start and an answer's end, where what people search for is; more slows every write. */
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

/**
 * What the index reads of a response: a stream's search text when it has one (RequestLogRow.
 * response_search_text: its first event and the text it streamed), else the body. `legacy`: the body alone,
 * as files indexed before that column existed hold it.
 */
function responseSource(prefix: string, legacy: boolean): string {
  return legacy
    ? `${prefix}response_body`
    : `coalesce(${prefix}response_search_text, ${prefix}response_body)`;
}

/** The indexed values of a row, its columns named with `prefix` ('new.', 'old.' or '' in a SELECT). */
function values(prefix: 'new.' | 'old.' | '', bodyChars: number, legacy = false): string {
  return (
    `${prefix}rowid, ${prefix}model, ${prefix}path, ${prefix}end_user, ${prefix}session, ` +
    `${cappedBody(`${prefix}request_body`, bodyChars)}, ${cappedBody(responseSource(prefix, legacy), bodyChars)}`
  );
}

/** The schema objects of the index, each as SQLite keeps its text in sqlite_master. */
function wanted(bodyChars: number, legacy = false): { name: string; sql: string }[] {
  return [
    {
      name: 'requests_fts',
      sql:
        `CREATE VIRTUAL TABLE requests_fts USING fts5(${COLUMNS}, content = 'requests', ` +
        `content_rowid = 'rowid', tokenize = 'unicode61 remove_diacritics 2', detail = none, columnsize = 0)`,
    },
    {
      name: 'requests_fts_source',
      sql:
        `CREATE VIEW requests_fts_source AS SELECT rowid AS row, model, path, end_user, session, ` +
        `${cappedBody('request_body', bodyChars)} AS request_body, ` +
        `${cappedBody(responseSource('', legacy), bodyChars)} AS response_body FROM requests`,
    },
    {
      name: 'requests_fts_delete',
      sql:
        `CREATE TRIGGER requests_fts_delete AFTER DELETE ON requests BEGIN ` +
        `INSERT INTO requests_fts (requests_fts, rowid, ${COLUMNS}) ` +
        `VALUES ('delete', ${values('old.', bodyChars, legacy)}); END`,
    },
    {
      name: 'requests_fts_update',
      sql:
        `CREATE TRIGGER requests_fts_update AFTER UPDATE ON requests BEGIN ` +
        `INSERT INTO requests_fts (requests_fts, rowid, ${COLUMNS}) ` +
        `VALUES ('delete', ${values('old.', bodyChars, legacy)}); ` +
        `INSERT INTO requests_fts (rowid, ${COLUMNS}) VALUES (${values('new.', bodyChars, legacy)}); END`,
    },
  ];
}

/** Indexes the rows with a rowid above the bound: those written since it was read, in the same transaction. */
export const INDEX_NEW_ROWS_SQL = `INSERT INTO requests_fts (rowid, ${COLUMNS})
  SELECT row, ${COLUMNS} FROM requests_fts_source WHERE row > ?`;

const DROP = `
  DROP TRIGGER IF EXISTS requests_fts_insert;
  DROP VIEW IF EXISTS requests_fts_source;
  DROP TRIGGER IF EXISTS requests_fts_delete;
  DROP TRIGGER IF EXISTS requests_fts_update;
  DROP TABLE IF EXISTS requests_fts;
`;

/**
 * From an index that read responses by their body alone to one that reads a stream's search text: only the
 * view and triggers change. Every row the old index holds was indexed from its body, and for rows without
 * search text (all of them, unless a version with it wrote rows, was downgraded and reindexed the file) the
 * new source is that same body. Rows that have search text are taken out under the old source and put back
 * under the new one, so a later delete removes exactly the words the index holds (FTS5 removes what it is
 * given). The first upgrade checks the column in every row to find none: from each row's header, without
 * reading the bodies stored before it (8,000 rows with 40 KB bodies, 330 MB: ~25 ms).
 */
function upgradeResponseSource(db: Db, bodyChars: number): void {
  const changed = wanted(bodyChars).filter((o) => o.name !== 'requests_fts');
  const withText = 'SELECT rowid FROM requests WHERE response_search_text IS NOT NULL';
  db.prepare(
    `INSERT INTO requests_fts (requests_fts, rowid, ${COLUMNS}) SELECT 'delete', ` +
      `${values('', bodyChars, true)} FROM requests WHERE rowid IN (${withText})`,
  ).run();
  db.exec(
    'DROP VIEW requests_fts_source; DROP TRIGGER requests_fts_delete; DROP TRIGGER requests_fts_update',
  );
  for (const o of changed) db.exec(o.sql);
  db.prepare(
    `INSERT INTO requests_fts (rowid, ${COLUMNS}) SELECT row, ${COLUMNS} FROM requests_fts_source ` +
      `WHERE row IN (${withText})`,
  ).run();
}

/** Whether the file has the index (and so the view new rows are indexed from). */
export const HAS_SEARCH_INDEX_SQL =
  "SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'view' AND name = 'requests_fts_source'";

export function hasSearchIndex(db: Db): boolean {
  return db.prepare<[], { n: number }>(HAS_SEARCH_INDEX_SQL).get()!.n > 0;
}

/**
 * Makes the file's index what the settings ask for. Nothing happens when it already is (the usual start);
 * otherwise the old index and triggers go, and, when enabled, the new ones come and index every row already
 * there (rows themselves are never touched). Returns what it did, for the start-up log.
 */
export function applyLogSearch(
  db: Db,
  s: LogSearchSettings,
  notify: (msg: string) => void = () => {},
): 'unchanged' | 'upgraded' | 'dropped' | 'rebuilt' {
  const want = s.enabled ? wanted(s.bodyChars) : [];
  const started = performance.now();
  return db.transaction(
    () => {
      const have = db
        .prepare<[], { name: string; sql: string }>(
          "SELECT name, sql FROM sqlite_master WHERE name IN ('requests_fts', 'requests_fts_insert', " +
            "'requests_fts_source', 'requests_fts_delete', 'requests_fts_update') ORDER BY name",
        )
        .all();
      const holds = (objects: { name: string; sql: string }[]) =>
        have.length === objects.length &&
        [...objects]
          .sort((a, b) => (a.name < b.name ? -1 : 1))
          .every((w, i) => have[i]!.name === w.name && have[i]!.sql === w.sql);
      if (holds(want)) return 'unchanged';
      if (s.enabled && holds(wanted(s.bodyChars, true))) {
        upgradeResponseSource(db, s.bodyChars);
        notify('request log search index now reads streamed responses by their text (no reindex)');
        return 'upgraded';
      }
      db.exec(DROP);
      if (!s.enabled) {
        notify('request log search index dropped (KEYRELAY_LOG_SEARCH=false): search scans the newest rows');
        return 'dropped';
      }
      // Once per change of settings (and once at the upgrade that made the index per transaction): the
      // start waits for it, so say why.
      const rows = db.prepare<[], { n: number | null }>('SELECT max(rowid) AS n FROM requests').get()!.n ?? 0;
      notify(`rebuilding the request log search index over ~${rows} rows; keyrelay starts when it is done`);
      for (const w of want) db.exec(w.sql);
      db.prepare(INDEX_NEW_ROWS_SQL).run(0);
      notify(`request log search index rebuilt in ${Math.round(performance.now() - started)} ms`);
      return 'rebuilt';
    },
    { immediate: true },
  );
}
