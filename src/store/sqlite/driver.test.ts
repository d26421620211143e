import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { defaultSqliteDriver, openConnection, sqliteCodeName, type Connection } from './driver.js';

let dir: string;
let db: Connection;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'keyrelay-driver-'));
  db = openConnection(join(dir, 't.db'));
  db.exec(`CREATE TABLE t (id TEXT PRIMARY KEY, n INTEGER NOT NULL CHECK (n >= 0), u TEXT UNIQUE) STRICT`);
});
afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

const count = () => db.prepare<[], { n: number }>('SELECT COUNT(*) AS n FROM t').get()!.n;
const codeOf = (f: () => unknown) => {
  try {
    f();
  } catch (err) {
    return (err as { code?: unknown }).code;
  }
  return 'no error';
};

describe(`SQLite driver seam on this Node (${defaultSqliteDriver()})`, () => {
  it('uses the driver chosen for this Node', () => {
    expect(db.driver).toBe(defaultSqliteDriver());
  });

  it('binds positional and @named parameters and reports changes', () => {
    const ins = db.prepare<[{ id: string; n: number; u: string | null }]>(
      'INSERT INTO t (id, n, u) VALUES (@id, @n, @u) ON CONFLICT(id) DO NOTHING',
    );
    expect(ins.run({ id: 'a', n: 1, u: null }).changes).toBe(1);
    expect(ins.run({ id: 'a', n: 1, u: null }).changes).toBe(0);
    expect(db.prepare('INSERT INTO t (id, n) VALUES (?, ?)').run('b', 2).changes).toBe(1);
  });

  it('returns plain objects, and undefined for no row', () => {
    db.prepare('INSERT INTO t (id, n) VALUES (?, ?)').run('a', 7);
    const row = db.prepare<[string], { id: string; n: number }>('SELECT id, n FROM t WHERE id = ?').get('a')!;
    expect(Object.getPrototypeOf(row)).toBe(Object.prototype);
    expect(row).toStrictEqual({ id: 'a', n: 7 });
    expect(db.prepare('SELECT id FROM t WHERE id = ?').get('zz')).toBeUndefined();
    const all = db.prepare<[], { id: string }>('SELECT id FROM t').all();
    expect(Object.getPrototypeOf(all[0])).toBe(Object.prototype);
    const iterated = [...db.prepare<[], { id: string; n: number }>('SELECT id, n FROM t').iterate()];
    expect(iterated).toStrictEqual([{ id: 'a', n: 7 }]);
    expect(Object.getPrototypeOf(iterated[0])).toBe(Object.prototype);
  });

  it('ends a read left early: an iteration broken off holds no snapshot, and its statement runs again', () => {
    db.exec('PRAGMA journal_mode = WAL');
    const ins = db.prepare('INSERT INTO t (id, n) VALUES (?, ?)');
    ins.run('a', 1);
    ins.run('b', 2);
    const scan = db.prepare<[], { id: string }>('SELECT id FROM t ORDER BY id');
    for (const row of scan.iterate()) if (row.id === 'a') break;
    const other = openConnection(join(dir, 't.db'));
    try {
      other.prepare('INSERT INTO t (id, n) VALUES (?, ?)').run('c', 3);
    } finally {
      other.close();
    }
    expect(count()).toBe(3);
    expect([...scan.iterate()].map((r) => r.id)).toEqual(['a', 'b', 'c']);
  });

  it("names constraint failures with better-sqlite3's codes on either driver", () => {
    const ins = db.prepare('INSERT INTO t (id, n, u) VALUES (?, ?, ?)');
    ins.run('a', 1, 'x');
    expect(codeOf(() => ins.run('a', 1, null))).toBe('SQLITE_CONSTRAINT_PRIMARYKEY');
    expect(codeOf(() => ins.run('b', 1, 'x'))).toBe('SQLITE_CONSTRAINT_UNIQUE');
    expect(codeOf(() => ins.run('c', -1, null))).toBe('SQLITE_CONSTRAINT_CHECK');
    expect(codeOf(() => ins.run('d', null, null))).toBe('SQLITE_CONSTRAINT_NOTNULL');
    expect(codeOf(() => db.exec('SELEKT 1'))).toBe('SQLITE_ERROR');
  });

  it('commits a transaction, rolls back one that throws, and keeps the first error', () => {
    const ins = db.prepare('INSERT INTO t (id, n) VALUES (?, ?)');
    expect(db.transaction(() => ins.run('a', 1).changes + ins.run('b', 1).changes)).toBe(2);
    expect(() =>
      db.transaction(() => {
        ins.run('c', 1);
        ins.run('a', 1);
      }),
    ).toThrow(/UNIQUE|PRIMARY/);
    expect(count()).toBe(2);
    db.transaction(() => ins.run('d', 1), { immediate: true });
    expect(count()).toBe(3);
  });

  it('nests as savepoints: an inner failure undoes only its own part', () => {
    const ins = db.prepare('INSERT INTO t (id, n) VALUES (?, ?)');
    let rejected = 0;
    db.transaction(() => {
      for (const [id, n] of [
        ['a', 1],
        ['b', -1],
        ['c', 1],
      ] as const) {
        try {
          db.transaction(() => ins.run(id, n));
        } catch {
          rejected++;
        }
      }
    });
    expect(rejected).toBe(1);
    expect(db.prepare<[], { id: string }>('SELECT id FROM t ORDER BY id').all()).toEqual([
      { id: 'a' },
      { id: 'c' },
    ]);
    // The outer failure undoes the inner parts too.
    expect(() =>
      db.transaction(() => {
        db.transaction(() => ins.run('d', 1));
        throw new Error('outer');
      }),
    ).toThrow('outer');
    expect(count()).toBe(2);
  });

  it('opens read-only: reads, refuses writes', () => {
    db.prepare('INSERT INTO t (id, n) VALUES (?, ?)').run('a', 1);
    const ro = openConnection(join(dir, 't.db'), { readonly: true });
    try {
      expect(ro.prepare('SELECT id FROM t').all()).toEqual([{ id: 'a' }]);
      expect(codeOf(() => ro.exec("INSERT INTO t (id, n) VALUES ('b', 1)"))).toBe('SQLITE_READONLY');
    } finally {
      ro.close();
    }
    expect(() => openConnection(join(dir, 'missing.db'), { readonly: true })).toThrow();
  });

  it('closes once; a second close is a no-op', () => {
    expect(db.open).toBe(true);
    db.close();
    expect(db.open).toBe(false);
    db.close();
  });
});

describe('sqliteCodeName', () => {
  it('maps extended result codes to names', () => {
    expect(sqliteCodeName(2067)).toBe('SQLITE_CONSTRAINT_UNIQUE');
    expect(sqliteCodeName(1555)).toBe('SQLITE_CONSTRAINT_PRIMARYKEY');
    expect(sqliteCodeName(275)).toBe('SQLITE_CONSTRAINT_CHECK');
    expect(sqliteCodeName(3091)).toBe('SQLITE_CONSTRAINT_DATATYPE');
    expect(sqliteCodeName(19)).toBe('SQLITE_CONSTRAINT');
    expect(sqliteCodeName(20)).toBe('SQLITE_MISMATCH');
    expect(sqliteCodeName(5)).toBe('SQLITE_BUSY');
    expect(sqliteCodeName(261)).toBe('SQLITE_BUSY'); // BUSY_RECOVERY: its primary name
  });
});
