import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { openSqlite } from './db.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'keyrelay-db-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const cacheSize = (cacheMb?: number): number => {
  const db = openSqlite(join(dir, 't.db'), { cacheMb });
  try {
    return db.prepare<[], { cache_size: number }>('PRAGMA cache_size').get()!.cache_size;
  } finally {
    db.close();
  }
};

// better-sqlite3 (Node 20) is built with a 16 MB cache, which the log writer's connection filled under load;
// node:sqlite has SQLite's 2 MB. Every connection gets SQLITE_CACHE_MB, whatever the driver.
it('gives every connection the page cache SQLITE_CACHE_MB asks for, 2 MB', () => {
  expect(cacheSize()).toBe(-2048);
  expect(cacheSize(24)).toBe(-24 * 1024);
});
