/**
 * The seam between the SQLite stores and a driver: Node's own node:sqlite where it exists unflagged
 * (22.13+, 23.4+, 24+), better-sqlite3 12 on Node 20 (see src/node-support.ts for why not one driver).
 * The choice is made once, by Node version; a missing driver is an error, never a fallback to another.
 * better-sqlite3 is loaded only on Node 20: loading it elsewhere is what aborted keyrelay on Node 24.
 *
 * Both drivers are synchronous and bind JS numbers as REAL. The seam evens out what differs: rows are
 * plain objects (node:sqlite's have no prototype), errors carry better-sqlite3's `SQLITE_*` code names
 * (node:sqlite's carry the number in `errcode`), and transactions are BEGIN/COMMIT (SAVEPOINT when nested)
 * here rather than better-sqlite3's `.transaction()`, which node:sqlite lacks. Integers read as numbers;
 * node:sqlite throws on one beyond 2^53 where better-sqlite3 loses precision (no column here gets near).
 * Named parameters are written `@name` in SQL and passed as `{ name }` (node:sqlite's bare names, on by
 * default); node:sqlite refuses unknown names and binds missing ones as NULL, so pass exactly the names used.
 */
import { createRequire } from 'node:module';
import { sqliteDriverFor, unsupportedNodeMessage, type SqliteDriverName } from '../../node-support.js';

export type { SqliteDriverName };

export interface RunResult {
  changes: number;
}

export interface Statement<P extends unknown[] = unknown[], R = unknown> {
  run(...params: P): RunResult;
  get(...params: P): R | undefined;
  all(...params: P): R[];
  /** One row at a time, for results too large to hold as objects at once. */
  iterate(...params: P): IterableIterator<R>;
}

export interface Connection {
  readonly driver: SqliteDriverName;
  readonly open: boolean;
  exec(sql: string): void;
  prepare<P extends unknown[] = unknown[], R = unknown>(sql: string): Statement<P, R>;
  /** Adds a deterministic SQL function of this connection, written in JS. */
  function(name: string, fn: (...args: SqlValue[]) => SqlValue): void;
  /**
   * Runs fn in a transaction (BEGIN IMMEDIATE takes the write lock first), or in a savepoint when one is
   * already open: a throw rolls back only its own part. fn must be synchronous.
   */
  transaction<T>(fn: () => T, opts?: { immediate?: boolean }): T;
  close(): void;
}

/** A value SQL hands a JS function, and takes back. */
export type SqlValue = string | number | bigint | null | Uint8Array;

export interface OpenOptions {
  readonly?: boolean;
  /** Tests run the store contract on a named driver; everything else takes this Node's. */
  driver?: SqliteDriverName;
  /** The connection's page cache, MB (db.ts sets SQLITE_CACHE_MB; the drivers' defaults differ). */
  cacheMb?: number;
}

/** This Node's driver; throws the unsupported-version line on a Node keyrelay does not run on. */
export function defaultSqliteDriver(): SqliteDriverName {
  const d = sqliteDriverFor(process.versions.node);
  if (!d) throw new Error(unsupportedNodeMessage(process.versions.node)!);
  return d;
}

export function openConnection(path: string, opts: OpenOptions = {}): Connection {
  const driver = opts.driver ?? defaultSqliteDriver();
  const raw = driver === 'node:sqlite' ? openNodeSqlite(path, opts) : openBetterSqlite(path, opts);
  return withTransactions(raw);
}

const require = createRequire(import.meta.url);

type RawConnection = Omit<Connection, 'transaction'>;

// ---- node:sqlite ----

interface NodeStatementSync {
  run(...params: unknown[]): { changes: number | bigint };
  get(...params: unknown[]): Record<string, unknown> | undefined;
  all(...params: unknown[]): Record<string, unknown>[];
  iterate(...params: unknown[]): IterableIterator<Record<string, unknown>>;
}
interface NodeDatabaseSync {
  exec(sql: string): void;
  prepare(sql: string): NodeStatementSync;
  function(name: string, options: { deterministic: boolean }, fn: (...args: SqlValue[]) => SqlValue): void;
  close(): void;
}
interface NodeSqliteModule {
  DatabaseSync: new (path: string, options?: { readOnly?: boolean }) => NodeDatabaseSync;
}

let nodeSqlite: NodeSqliteModule | undefined;

/** node:sqlite, with only its own ExperimentalWarning silenced (Node 22 prints one at load; 24 does not). */
function loadNodeSqlite(): NodeSqliteModule {
  if (nodeSqlite) return nodeSqlite;
  const emit = process.emitWarning.bind(process) as (...args: unknown[]) => void;
  // eslint-disable-next-line @typescript-eslint/unbound-method -- put back as it was, never called from here
  const original = process.emitWarning;
  process.emitWarning = (warning: string | Error, ...rest: unknown[]) => {
    const type = typeof rest[0] === 'string' ? rest[0] : (rest[0] as { type?: string } | undefined)?.type;
    const text = typeof warning === 'string' ? warning : warning.message;
    if (type === 'ExperimentalWarning' && text.startsWith('SQLite ')) return;
    emit(warning, ...rest);
  };
  try {
    nodeSqlite = require('node:sqlite') as NodeSqliteModule;
  } finally {
    process.emitWarning = original;
  }
  return nodeSqlite;
}

const PRIMARY_CODES: Record<number, string> = {
  1: 'ERROR',
  2: 'INTERNAL',
  3: 'PERM',
  4: 'ABORT',
  5: 'BUSY',
  6: 'LOCKED',
  7: 'NOMEM',
  8: 'READONLY',
  9: 'INTERRUPT',
  10: 'IOERR',
  11: 'CORRUPT',
  12: 'NOTFOUND',
  13: 'FULL',
  14: 'CANTOPEN',
  15: 'PROTOCOL',
  16: 'EMPTY',
  17: 'SCHEMA',
  18: 'TOOBIG',
  19: 'CONSTRAINT',
  20: 'MISMATCH',
  21: 'MISUSE',
  22: 'NOLFS',
  23: 'AUTH',
  24: 'FORMAT',
  25: 'RANGE',
  26: 'NOTADB',
};
/** Extended constraint codes (19 | n << 8): the stores tell a unique violation from a bad row by them. */
const CONSTRAINT_CODES = [
  'CONSTRAINT',
  'CONSTRAINT_CHECK',
  'CONSTRAINT_COMMITHOOK',
  'CONSTRAINT_FOREIGNKEY',
  'CONSTRAINT_FUNCTION',
  'CONSTRAINT_NOTNULL',
  'CONSTRAINT_PRIMARYKEY',
  'CONSTRAINT_TRIGGER',
  'CONSTRAINT_UNIQUE',
  'CONSTRAINT_VTAB',
  'CONSTRAINT_ROWID',
  'CONSTRAINT_PINNED',
  'CONSTRAINT_DATATYPE',
];

/** better-sqlite3's code name for a node:sqlite error's extended result code (e.g. 2067 → SQLITE_CONSTRAINT_UNIQUE). */
export function sqliteCodeName(errcode: number): string {
  const primary = errcode & 0xff;
  const name =
    primary === 19 ? (CONSTRAINT_CODES[errcode >> 8] ?? 'CONSTRAINT') : (PRIMARY_CODES[primary] ?? 'ERROR');
  return `SQLITE_${name}`;
}

function normalized(err: unknown): unknown {
  if (err instanceof Error && typeof (err as { errcode?: unknown }).errcode === 'number') {
    (err as { code?: string }).code = sqliteCodeName((err as unknown as { errcode: number }).errcode);
  }
  return err;
}

function call<T>(f: () => T): T {
  try {
    return f();
  } catch (err) {
    throw normalized(err);
  }
}

const plain = (row: Record<string, unknown> | undefined) => (row === undefined ? undefined : { ...row });

/**
 * A loop that stops early must end node:sqlite's own iterator too: until it does, its statement stays mid-step
 * and holds the connection's read snapshot, so that connection reads what was committed before it began.
 */
function* plainRows(
  it: IterableIterator<Record<string, unknown>>,
): IterableIterator<Record<string, unknown>> {
  try {
    for (;;) {
      const next = call(() => it.next());
      if (next.done) return;
      yield { ...next.value };
    }
  } finally {
    it.return?.();
  }
}

function openNodeSqlite(path: string, opts: OpenOptions): RawConnection {
  const { DatabaseSync } = loadNodeSqlite();
  const db = call(() => new DatabaseSync(path, { readOnly: opts.readonly ?? false }));
  let open = true;
  return {
    driver: 'node:sqlite',
    get open() {
      return open;
    },
    exec: (sql) => call(() => db.exec(sql)),
    function: (name, fn) => call(() => db.function(name, { deterministic: true }, fn)),
    prepare<P extends unknown[], R>(sql: string): Statement<P, R> {
      const s = call(() => db.prepare(sql));
      return {
        run: (...p) => ({ changes: Number(call(() => s.run(...p)).changes) }),
        get: (...p) => plain(call(() => s.get(...p))) as R | undefined,
        all: (...p) => call(() => s.all(...p)).map((r) => ({ ...r })) as R[],
        iterate: (...p) => plainRows(call(() => s.iterate(...p))) as IterableIterator<R>,
      };
    },
    close() {
      if (!open) return;
      open = false;
      db.close();
    },
  };
}

// ---- better-sqlite3 (Node 20 only) ----

type BetterSqlite = typeof import('better-sqlite3');

function openBetterSqlite(path: string, opts: OpenOptions): RawConnection {
  let Database: BetterSqlite;
  try {
    Database = require('better-sqlite3') as BetterSqlite;
  } catch (err) {
    throw new Error(
      `keyrelay on Node ${process.versions.node} stores SQLite through better-sqlite3, which failed to load ` +
        `(${(err as Error).message.split('\n')[0]}); reinstall it, or run Node 22.13+ or 24`,
      { cause: err },
    );
  }
  const db = new Database(path, { readonly: opts.readonly ?? false, fileMustExist: opts.readonly ?? false });
  return {
    driver: 'better-sqlite3',
    get open() {
      return db.open;
    },
    exec: (sql) => void db.exec(sql),
    function: (name, fn) => void db.function(name, { deterministic: true }, fn),
    prepare: <P extends unknown[], R>(sql: string) => db.prepare<P, R>(sql) as unknown as Statement<P, R>,
    close() {
      if (db.open) db.close();
    },
  };
}

// ---- transactions, the same on both ----

function withTransactions(raw: RawConnection): Connection {
  let depth = 0;
  const statements = new Map<string, Statement>();
  const run = (sql: string) => {
    let s = statements.get(sql);
    if (!s) statements.set(sql, (s = raw.prepare(sql)));
    s.run();
  };
  return {
    driver: raw.driver,
    get open() {
      return raw.open;
    },
    exec: raw.exec,
    function: raw.function,
    prepare: raw.prepare,
    close: raw.close,
    transaction<T>(fn: () => T, opts: { immediate?: boolean } = {}): T {
      const nested = depth > 0;
      const savepoint = `kr_${depth}`;
      run(nested ? `SAVEPOINT ${savepoint}` : opts.immediate ? 'BEGIN IMMEDIATE' : 'BEGIN');
      depth++;
      try {
        const result = fn();
        run(nested ? `RELEASE ${savepoint}` : 'COMMIT');
        return result;
      } catch (err) {
        try {
          if (nested) {
            run(`ROLLBACK TO ${savepoint}`);
            run(`RELEASE ${savepoint}`);
          } else run('ROLLBACK');
        } catch {
          // SQLite already rolled back on its own (e.g. SQLITE_FULL): the first error is the one to report.
        }
        throw err;
      } finally {
        depth--;
      }
    },
  };
}
