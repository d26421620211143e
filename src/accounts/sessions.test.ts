import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SqliteConfigStore } from '../store/sqlite/config-store.js';
import {
  createSession,
  deleteSession,
  deleteSessionsForAccount,
  getSession,
  hashSessionToken,
  type SessionDeps,
} from './sessions.js';

const MIN = 60_000;

describe('sessions', () => {
  let dir: string;
  let store: SqliteConfigStore;
  let clock: number;
  let deps: SessionDeps;
  let accountId: string;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'kr-sessions-'));
    store = new SqliteConfigStore(join(dir, 'config.db'));
    await store.migrate();
    clock = Date.parse('2026-05-01T00:00:00Z');
    deps = { store, idleMs: 30 * MIN, maxMs: 240 * MIN, now: () => new Date(clock) };
    accountId = (await store.createAccount({ id: 'acct-1', email: 'a@example.com', password_hash: 'x' })).id;
  });
  afterEach(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('stores only the SHA-256 of the token, never the token', async () => {
    const { token, session } = await createSession(deps, accountId);
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(session.id_hash).toBe(hashSessionToken(token));
    expect(await store.getSession(token)).toBeNull();
    expect((await store.getSession(session.id_hash))?.account_id).toBe(accountId);
  });

  it('gives a different token to every session', async () => {
    const a = await createSession(deps, accountId);
    const b = await createSession(deps, accountId);
    expect(a.token).not.toBe(b.token);
  });

  it('refuses malformed and unknown tokens without a match', async () => {
    expect(await getSession(deps, undefined)).toBeNull();
    expect(await getSession(deps, 'short')).toBeNull();
    expect(await getSession(deps, 'A'.repeat(43))).toBeNull();
  });

  it('expires a session idle for longer than idleMs and deletes it', async () => {
    const { token, session } = await createSession(deps, accountId);
    clock += 30 * MIN;
    expect(await getSession(deps, token)).toBeNull();
    expect(await store.getSession(session.id_hash)).toBeNull();
  });

  it('keeps a session in use alive, writing last_seen_at at most once a minute', async () => {
    const { token, session } = await createSession(deps, accountId);
    clock += 30 * 1000;
    await getSession(deps, token);
    expect((await store.getSession(session.id_hash))?.last_seen_at).toBe(session.last_seen_at);
    clock += 31 * 1000;
    await getSession(deps, token);
    expect((await store.getSession(session.id_hash))?.last_seen_at).toBe(new Date(clock).toISOString());
    for (let i = 0; i < 5; i++) {
      clock += 20 * MIN;
      expect(await getSession(deps, token)).not.toBeNull();
    }
  });

  it('ends a session at its absolute expiry however active it is', async () => {
    const { token } = await createSession(deps, accountId);
    for (let i = 0; i < 11; i++) {
      clock += 20 * MIN;
      expect(await getSession(deps, token)).not.toBeNull();
    }
    clock += 20 * MIN; // 240 min since login
    expect(await getSession(deps, token)).toBeNull();
  });

  it('deletes one session at logout and all of an account at password change', async () => {
    const a = await createSession(deps, accountId);
    const b = await createSession(deps, accountId);
    const c = await createSession(deps, accountId);
    await deleteSession(deps, a.token);
    expect(await getSession(deps, a.token)).toBeNull();
    expect(await getSession(deps, b.token)).not.toBeNull();
    await deleteSessionsForAccount(deps, accountId);
    expect(await getSession(deps, b.token)).toBeNull();
    expect(await getSession(deps, c.token)).toBeNull();
  });
});
