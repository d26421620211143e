/**
 * Which Node versions keyrelay runs on, and the SQLite driver each uses. No imports: bin/keyrelay.js reads it
 * before anything else loads, so an unsupported Node is refused in one line instead of crashing later.
 *
 * better-sqlite3 12 aborts on Node ≥ 24.19 (node::ObjectWrap cleanup hooks) and 13 crashes on Node 20, so no
 * one version serves all three: Node 20 uses better-sqlite3 12; 22.13+ and 23.4+ use Node's own node:sqlite,
 * from where it no longer needs --experimental-sqlite. package.json `engines` says the same (a test checks).
 */
export const SUPPORTED_NODE = '^20.19.0 || ^22.13.0 || >=23.4.0';

export type SqliteDriverName = 'node:sqlite' | 'better-sqlite3';

/** The SQLite driver for a Node version, or null when keyrelay does not run on it. */
export function sqliteDriverFor(version: string): SqliteDriverName | null {
  const [major = 0, minor = 0] = version.replace(/^v/, '').split('.').map(Number);
  if (major === 20) return minor >= 19 ? 'better-sqlite3' : null;
  if (major === 22) return minor >= 13 ? 'node:sqlite' : null;
  if (major === 23) return minor >= 4 ? 'node:sqlite' : null;
  return major >= 24 ? 'node:sqlite' : null;
}

/** The one line to print when refusing to start, or null on a supported version. */
export function unsupportedNodeMessage(version: string): string | null {
  if (sqliteDriverFor(version)) return null;
  return `keyrelay: Node ${version.replace(/^v/, '')} is not supported; use Node 20.19+, 22.13+ or 24 (${SUPPORTED_NODE})`;
}
