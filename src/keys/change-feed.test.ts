import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { newId } from '../ids.js';
import { SqliteConfigStore } from '../store/sqlite/config-store.js';
import type { ConfigStore } from '../store/types.js';
import { startKeyChangeFeed, type KeyChangeFeed } from './change-feed.js';
import type { KeyEvent } from './events.js';
import { generateKey, hashKey } from './format.js';
import { KeyVerifier } from './verify.js';

const POLL_MS = 20;

let dir: string;
let path: string;
let writer: SqliteConfigStore;
let feed: KeyChangeFeed | undefined;
const opened: ConfigStore[] = [];

function open(): SqliteConfigStore {
  const s = new SqliteConfigStore(path);
  opened.push(s);
  return s;
}

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'keyrelay-feed-'));
  path = join(dir, 'keyrelay.db');
  writer = open();
  await writer.migrate();
});

afterEach(async () => {
  await feed?.stop();
  feed = undefined;
  for (const s of opened.splice(0)) await s.close();
  rmSync(dir, { recursive: true, force: true });
});

async function newKey(store: ConfigStore, key = generateKey()) {
  const a = await store.createAccount({ id: newId(), email: `${newId()}@example.com`, password_hash: 'x' });
  return store.createKey({ id: newId(), account_id: a.id, name: 'k', hash: hashKey(key), hint: 'kr_…' });
}

/** A log that keeps what it is told. */
function recordingLog() {
  const lines: { level: string; msg: string }[] = [];
  return {
    lines,
    warn: (_: object, msg: string) => void lines.push({ level: 'warn', msg }),
    info: (_: object, msg: string) => void lines.push({ level: 'info', msg }),
  };
}

async function until(what: string, cond: () => boolean, ms = 2_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('startKeyChangeFeed', () => {
  it('evicts a key changed by another process’s store, and only after the feed started', async () => {
    const before = await newKey(writer);
    await writer.renameKey(before.id, 'changed before start');
    const k = await newKey(writer);
    const events: KeyEvent[] = [];
    feed = await startKeyChangeFeed({
      store: open(),
      evict: (e) => events.push(e),
      log: recordingLog(),
      intervalMs: POLL_MS,
    });
    await writer.touchKeys(new Map([[k.id, new Date().toISOString()]]));
    await writer.revokeKey(k.id, new Date().toISOString());
    await until('the revoke', () => events.length > 0);
    await new Promise((r) => setTimeout(r, POLL_MS * 3));
    expect(events).toEqual([{ type: 'key_changed', key_id: k.id }]);
  });

  it('makes a KeyVerifier with a long TTL refuse a key revoked elsewhere within a few polls', async () => {
    const presented = generateKey();
    const k = await newKey(writer, presented);
    const server = open();
    const verifier = new KeyVerifier(server, 600_000);
    feed = await startKeyChangeFeed({
      store: server,
      evict: (e) => verifier.onEvent(e),
      log: recordingLog(),
      intervalMs: POLL_MS,
    });
    expect((await verifier.check(presented)).ok).toBe(true);
    await open().revokeKey(k.id, new Date().toISOString());
    let code: string | undefined;
    for (let i = 0; i < 100 && code !== 'proxy_key_revoked'; i++) {
      await new Promise((r) => setTimeout(r, POLL_MS));
      const checked = await verifier.check(presented);
      code = checked.ok ? undefined : checked.error.code;
    }
    expect(code).toBe('proxy_key_revoked');
  });

  it('survives an unreadable store: warns once, catches up on recovery without losing a change', async () => {
    const k = await newKey(writer);
    let current: ConfigStore = open();
    const broken = open();
    await broken.close();
    const log = recordingLog();
    const events: KeyEvent[] = [];
    feed = await startKeyChangeFeed({
      store: {
        keyChangeHead: () => current.keyChangeHead(),
        keyChangesSince: (seq) => current.keyChangesSince(seq),
      },
      evict: (e) => events.push(e),
      log,
      intervalMs: POLL_MS,
    });
    current = broken;
    await writer.revokeKey(k.id, new Date().toISOString());
    await new Promise((r) => setTimeout(r, POLL_MS * 10));
    expect(events).toEqual([]);
    expect(log.lines).toEqual([{ level: 'warn', msg: expect.stringContaining('unreadable') }]);
    current = open();
    await until('the missed revoke', () => events.length > 0);
    expect(events).toEqual([{ type: 'key_changed', key_id: k.id }]);
    expect(log.lines.map((l) => l.level)).toEqual(['warn', 'info']);
  });

  it('flushes the whole cache once the head is readable when the feed started without it', async () => {
    const broken = open();
    await broken.close();
    let current: ConfigStore = broken;
    const events: KeyEvent[] = [];
    feed = await startKeyChangeFeed({
      store: {
        keyChangeHead: () => current.keyChangeHead(),
        keyChangesSince: (seq) => current.keyChangesSince(seq),
      },
      evict: (e) => events.push(e),
      log: recordingLog(),
      intervalMs: POLL_MS,
    });
    current = open();
    await until('the flush', () => events.length > 0);
    expect(events).toEqual([{ type: 'flush_all' }]);
  });

  it('flushes instead of evicting one by one when many keys changed at once', async () => {
    const keys = [];
    for (let i = 0; i < 50; i++) keys.push(await newKey(writer));
    const events: KeyEvent[] = [];
    const reader = open();
    // Held shut while the changes are made, so that one poll sees them all.
    let readable = true;
    feed = await startKeyChangeFeed({
      store: {
        keyChangeHead: () => reader.keyChangeHead(),
        keyChangesSince: (seq) =>
          readable ? reader.keyChangesSince(seq) : Promise.reject(new Error('held shut')),
      },
      evict: (e) => events.push(e),
      log: recordingLog(),
      intervalMs: POLL_MS,
    });
    readable = false;
    for (const k of keys) await writer.renameKey(k.id, 'bulk');
    readable = true;
    await until('the flush', () => events.length > 0);
    expect(events).toEqual([{ type: 'flush_all' }]);
  });

  it('stops polling on stop()', async () => {
    const k = await newKey(writer);
    const events: KeyEvent[] = [];
    const f = await startKeyChangeFeed({
      store: open(),
      evict: (e) => events.push(e),
      log: recordingLog(),
      intervalMs: POLL_MS,
    });
    await f.stop();
    await writer.revokeKey(k.id, new Date().toISOString());
    await new Promise((r) => setTimeout(r, POLL_MS * 5));
    expect(events).toEqual([]);
  });
});
