/** Pool handling and the numbered-migration runner both PostgreSQL stores share. */
import pg from 'pg';

export interface PgMigration {
  version: number;
  name: string;
  sql: string;
}

/** Connections per pool; each instance opens two pools (config store and log store). */
const POOL_MAX = 10;
const CONNECT_TIMEOUT_MS = 10_000;
/** Client-side bound on any one query: a timed-out connection is dropped by the pool, not reused. */
const QUERY_TIMEOUT_MS = 30_000;
/** Migrations (and waiting for another instance's) may legitimately take long on a big table. */
const MIGRATION_QUERY_TIMEOUT_MS = 24 * 3_600_000;

/** The stores accept a pool (shared, left open by close()) or a URL (own pool, ended by close()). */
export function resolvePool(poolOrUrl: pg.Pool | string): { pool: pg.Pool; owned: boolean } {
  if (typeof poolOrUrl !== 'string') return { pool: poolOrUrl, owned: false };
  const pool = new pg.Pool({
    connectionString: poolOrUrl,
    max: POOL_MAX,
    // Without these a server that is down or silent (partition, failover to another host) makes callers
    // wait for ever: the log queue would stop writing for good and key lookups would hang requests.
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    query_timeout: QUERY_TIMEOUT_MS,
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
  });
  // An idle client losing its connection emits 'error' on the pool; unhandled, it would end the process.
  // The next query gets a fresh connection or fails with an error its caller handles.
  pool.on('error', () => {});
  return { pool, owned: true };
}

// Arbitrary constant: every keyrelay instance takes this lock before migrating, so two starting at once
// apply each migration exactly once.
const MIGRATION_LOCK = '7351842096421';

/** Applies the not-yet-applied migrations of `scope` under a session advisory lock, each in a transaction. */
export async function runPgMigrations(
  pool: pg.Pool,
  scope: 'config' | 'log',
  migrations: readonly PgMigration[],
): Promise<void> {
  const conn = await pool.connect();
  // pg's query config accepts query_timeout; its type declarations do not list it.
  const client = {
    query: <R extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values?: unknown[]) =>
      conn.query<R>({ text, values, query_timeout: MIGRATION_QUERY_TIMEOUT_MS } as pg.QueryConfig),
  };
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    try {
      await client.query(`CREATE TABLE IF NOT EXISTS keyrelay_migrations (
        scope text NOT NULL,
        version integer NOT NULL,
        name text NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (scope, version)
      )`);
      const done = await client.query<{ version: number }>(
        'SELECT version FROM keyrelay_migrations WHERE scope = $1',
        [scope],
      );
      const applied = new Set(done.rows.map((r) => r.version));
      for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
        if (applied.has(m.version)) continue;
        await client.query('BEGIN');
        try {
          await client.query(m.sql);
          await client.query('INSERT INTO keyrelay_migrations (scope, version, name) VALUES ($1, $2, $3)', [
            scope,
            m.version,
            m.name,
          ]);
          await client.query('COMMIT');
        } catch (err) {
          await client.query('ROLLBACK');
          throw err;
        }
      }
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]);
    }
  } finally {
    conn.release();
  }
}

/**
 * Runs fn in a transaction on one client of the pool: committed when it returns, rolled back when it throws.
 * A connection lost while checked out emits 'error' on the client, which would end the process unhandled;
 * the failing query reports it to the caller instead. A client that failed mid-transaction is discarded
 * rather than handed to the next caller.
 */
export async function inTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  const ignore = () => {};
  client.on('error', ignore);
  let broken: Error | undefined;
  try {
    await client.query('BEGIN');
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    broken = err instanceof Error ? err : new Error(String(err));
    throw err;
  } finally {
    client.off('error', ignore);
    client.release(broken);
  }
}

/** Our times are Dates from pg (timestamptz); the interface speaks toISOString() strings. */
export function isoOrNull(v: unknown): string | null {
  if (v === null || v === undefined) return null;
  return (v instanceof Date ? v : new Date(v as string)).toISOString();
}

export function pgErrorCode(err: unknown): string {
  return err instanceof Error && 'code' in err && typeof err.code === 'string' ? err.code : '';
}
