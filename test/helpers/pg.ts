/**
 * A throwaway PostgreSQL database per test run on the local server (127.0.0.1:5432, user postgres, trust
 * auth). Never skipped: an unreachable server fails the test that asked for it.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';

const ADMIN_URL = 'postgres://postgres@127.0.0.1:5432/test';

export interface TestDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

async function runAdmin(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: ADMIN_URL, connectionTimeoutMillis: 5000 });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

export async function createTestDatabase(prefix = 'keyrelay_test'): Promise<TestDatabase> {
  const name = `${prefix}_${randomBytes(6).toString('hex')}`;
  await runAdmin(`CREATE DATABASE ${name}`);
  return {
    name,
    url: `postgres://postgres@127.0.0.1:5432/${name}`,
    // FORCE ends connections a failed test left open (PostgreSQL 13+).
    drop: () => runAdmin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`),
  };
}

/**
 * A pool for a test's own queries on a test database. Such a database is dropped WITH (FORCE), and pg's
 * Pool.end() resolves before its clients' sockets have closed: a client still closing then receives 57P01
 * ("terminating connection due to administrator command"), which the pool re-emits as 'error', and without
 * a listener that is an uncaught exception failing the whole run (seen in CI on Node 24, about 1 drop in 60).
 */
export function testPool(url: string, max?: number): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, ...(max ? { max } : {}) });
  pool.on('error', () => {});
  return pool;
}
