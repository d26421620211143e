/**
 * The request log's full-text index on PostgreSQL, as KEYRELAY_LOG_SEARCH and the body limit (bodyChars)
 * ask, applied at start after the numbered migrations (migration v4 created the first one): a stored
 * generated `search_vector` column with a GIN index. The settings it was built with are kept as the
 * column's comment, so a start with other settings knows to rebuild it.
 *
 * Off drops the column (and with it the index): PostgreSQL then neither computes a tsvector per inserted row
 * nor updates the GIN index, and search scans the newest rows instead (log-store.ts). On again adds the
 * column back, which computes it for every row already there (a table rewrite, under an exclusive lock:
 * on a large log, minutes during which the log cannot be written or read).
 *
 * A column built before these settings existed (migration v4: whole bodies, no comment) is kept as it is
 * and marked `body_chars=all`: replacing it rewrites the table, which an upgrade must not do on its own. It
 * serves any body limit (it indexes more); switching search off and on again rebuilds it with the limit.
 *
 * Bodies count as on SQLite (log-search.ts there): up to `bodyChars` characters each, half from the start
 * and half from the end. Punctuation becomes spaces first, so words split as SQLite's FTS5 splits them
 * (PostgreSQL's parser would keep paths, emails and URLs whole).
 */
import type pg from 'pg';

/** Serialises two instances applying the setting at once (the migrations have their own lock). */
const SEARCH_LOCK = '7351842096422';

function cappedBody(column: string, bodyChars: number): string {
  if (bodyChars <= 0) return "''";
  const head = Math.ceil(bodyChars / 2);
  const tail = Math.floor(bodyChars / 2);
  const b = `coalesce(${column}, '')`;
  const tailSql = tail > 0 ? ` || ' ' || right(${b}, ${tail})` : '';
  return `CASE WHEN length(${b}) <= ${bodyChars} THEN ${b} ELSE left(${b}, ${head})${tailSql} END`;
}

function columnSql(bodyChars: number): string {
  return `search_vector tsvector GENERATED ALWAYS AS (
    to_tsvector('simple'::regconfig, regexp_replace(
      coalesce(model, '') || ' ' || path || ' ' || coalesce(end_user, '') || ' ' || coalesce(session, '') || ' ' ||
      ${cappedBody('request_body', bodyChars)} || ' ' ||
      ${cappedBody('coalesce(response_search_text, response_body)', bodyChars)},
      '[^[:alnum:]]+', ' ', 'g'))
  ) STORED`;
}

/** What the column's comment says when it was built with these settings. */
const marker = (bodyChars: number) => `keyrelay search: body_chars=${bodyChars} stream_text`;
/**
 * A column from before streams had their own search text (migration v6): it reads a stream's frames, which
 * still finds what it found. Kept on upgrade, as a rebuild rewrites the table; off and on again rebuilds it.
 */
const framesMarker = (bodyChars: number) => `keyrelay search: body_chars=${bodyChars}`;
const WHOLE_BODIES = 'keyrelay search: body_chars=all';

export async function hasSearchColumn(pool: pg.Pool): Promise<boolean> {
  const { rows } = await pool.query(
    `SELECT 1 FROM pg_attribute
     WHERE attrelid = 'requests'::regclass AND attname = 'search_vector' AND NOT attisdropped`,
  );
  return rows.length > 0;
}

/** Makes the table's index what the settings ask for; nothing happens when it already is. */
export async function applyPgLogSearch(
  pool: pg.Pool,
  s: { enabled: boolean; bodyChars: number },
  notify: (msg: string) => void = () => {},
): Promise<'unchanged' | 'dropped' | 'rebuilt' | 'kept'> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    try {
      await client.query('SELECT pg_advisory_xact_lock($1)', [SEARCH_LOCK]);
      const { rows } = await client.query<{ comment: string | null }>(
        `SELECT col_description(attrelid, attnum) AS comment FROM pg_attribute
         WHERE attrelid = 'requests'::regclass AND attname = 'search_vector' AND NOT attisdropped`,
      );
      const have = rows[0];
      let done: 'unchanged' | 'dropped' | 'rebuilt' | 'kept' = 'unchanged';
      const earlier =
        have &&
        (have.comment === null ||
          have.comment === WHOLE_BODIES ||
          have.comment === framesMarker(s.bodyChars));
      // An earlier version's column is kept, as replacing it rewrites the table; unless the table is empty
      // (a new install: migration v4 made that column), where there is nothing to rewrite.
      const keep =
        s.enabled &&
        earlier &&
        (await client.query<{ any: boolean }>('SELECT EXISTS (SELECT 1 FROM requests) AS any')).rows[0]!.any;
      if (!s.enabled && have) {
        await client.query('ALTER TABLE requests DROP COLUMN search_vector');
        notify('request log search index dropped (KEYRELAY_LOG_SEARCH=false): search scans the newest rows');
        done = 'dropped';
      } else if (keep) {
        if (have.comment === null) {
          await client.query(`COMMENT ON COLUMN requests.search_vector IS '${WHOLE_BODIES}'`);
          notify(
            'request log search index from an earlier version kept: it indexes whole bodies; to index ' +
              'head and tail only, start once with KEYRELAY_LOG_SEARCH=false, then with true ' +
              '(a table rewrite)',
          );
        } else if (have.comment !== WHOLE_BODIES) {
          notify(
            'request log search index from an earlier version kept: it reads streamed responses by their SSE ' +
              'frames, not their text; to rebuild it, start once with KEYRELAY_LOG_SEARCH=false, then with true ' +
              '(a table rewrite)',
          );
        }
        done = 'kept';
      } else if (s.enabled && have?.comment !== marker(s.bodyChars)) {
        notify('rebuilding the request log search index (a table rewrite); keyrelay starts when it is done');
        await client.query('ALTER TABLE requests DROP COLUMN IF EXISTS search_vector');
        await client.query(`ALTER TABLE requests ADD COLUMN ${columnSql(s.bodyChars)}`);
        await client.query('CREATE INDEX requests_search ON requests USING gin (search_vector)');
        await client.query(`COMMENT ON COLUMN requests.search_vector IS '${marker(s.bodyChars)}'`);
        notify('request log search index rebuilt');
        done = 'rebuilt';
      }
      await client.query('COMMIT');
      return done;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    }
  } finally {
    client.release();
  }
}
