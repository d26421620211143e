/**
 * Key domain actions shared by the CLI and the console API. Every change that can make a key stop working
 * is published on the key event bus so every instance's verification cache drops it.
 */
import { consoleError } from '../console-api/errors.js';
import { newId } from '../ids.js';
import type { ConfigStore, KeyLimits, KeyRecord, KeyStatus, KeyView } from '../store/types.js';
import type { KeyEventBus } from './events.js';
import { mergeKeyLimits, pickLimits } from '../limits/settings.js';
import { generateKey, hashKey, keyHint } from './format.js';

export const MAX_ROLL_GRACE_SECONDS = 24 * 3600;

export interface KeyDeps {
  store: ConfigStore;
  bus: KeyEventBus;
  now?: () => Date;
}

export function keyStatus(k: KeyRecord, now = new Date()): KeyStatus {
  if (k.revoked_at) return 'revoked';
  if (k.expires_at && Date.parse(k.expires_at) <= now.getTime()) return 'expired';
  return 'active';
}

export function toKeyView(k: KeyRecord, now = new Date()): KeyView {
  return { ...k, status: keyStatus(k, now) };
}

/** The name as stored (trimmed), or 400 invalid_name. */
export function checkKeyName(name: string): string {
  const trimmed = name.trim();
  if (!trimmed || trimmed.length > 100) throw consoleError('invalid_name');
  return trimmed;
}

export interface CreatedKey {
  view: KeyView;
  /** The full key: returned once, at creation, never stored. */
  key: string;
}

export async function createKey(
  deps: KeyDeps,
  input: { accountId: string; name: string; expiresAt?: string | null; limits?: Partial<KeyLimits> },
): Promise<CreatedKey> {
  const name = checkKeyName(input.name);
  const limits = input.limits ? mergeKeyLimits(null, input.limits) : null;
  const key = generateKey();
  let rec = await deps.store.createKey({
    id: newId(),
    account_id: input.accountId,
    name,
    hash: hashKey(key),
    hint: keyHint(key),
    expires_at: input.expiresAt ?? null,
  });
  // Nobody holds the new key yet, so setting its limits in a second write opens no unlimited window.
  if (limits) rec = (await deps.store.setKeyLimits(rec.id, limits)) ?? rec;
  return { view: toKeyView(rec, deps.now?.()), key };
}

async function ownedKey(deps: KeyDeps, accountId: string | null, keyId: string): Promise<KeyRecord> {
  const k = await deps.store.getKey(keyId);
  // Another account's key answers exactly like a missing one.
  if (!k || (accountId !== null && k.account_id !== accountId)) {
    throw consoleError('key_not_found');
  }
  return k;
}

/** accountId null = operator (CLI): any key. */
export async function revokeKey(deps: KeyDeps, accountId: string | null, keyId: string): Promise<KeyView> {
  await ownedKey(deps, accountId, keyId);
  const now = deps.now?.() ?? new Date();
  const rec = await deps.store.revokeKey(keyId, now.toISOString());
  if (!rec) throw consoleError('key_not_found');
  await deps.bus.publish({ type: 'key_changed', key_id: keyId });
  return toKeyView(rec, now);
}

export async function renameKey(
  deps: KeyDeps,
  accountId: string,
  keyId: string,
  name: string,
): Promise<KeyView> {
  await ownedKey(deps, accountId, keyId);
  await deps.store.renameKey(keyId, checkKeyName(name));
  return toKeyView((await deps.store.getKey(keyId))!, deps.now?.());
}

/** Roll: a new key with the same name, and the old one expiring after the grace period (0–24 h). */
export async function rollKey(
  deps: KeyDeps,
  accountId: string,
  keyId: string,
  graceSeconds: number,
): Promise<{ created: CreatedKey; old: KeyView }> {
  if (!Number.isInteger(graceSeconds) || graceSeconds < 0 || graceSeconds > MAX_ROLL_GRACE_SECONDS) {
    throw consoleError('invalid_grace');
  }
  const old = await ownedKey(deps, accountId, keyId);
  const now = deps.now?.() ?? new Date();
  if (keyStatus(old, now) !== 'active') throw consoleError('key_not_active');
  // The new key inherits the old one's limits: rolling must never lift them.
  const limits = pickLimits(old);
  const created = await createKey(deps, { accountId, name: old.name, limits });
  const expiresAt = new Date(now.getTime() + graceSeconds * 1000).toISOString();
  const keep =
    old.expires_at && Date.parse(old.expires_at) < Date.parse(expiresAt) ? old.expires_at : expiresAt;
  await deps.store.setKeyExpiry(keyId, keep);
  await deps.bus.publish({ type: 'key_changed', key_id: keyId });
  return { created, old: toKeyView((await deps.store.getKey(keyId))!, now) };
}

/**
 * Changes a key's limits: fields left out keep their value, null clears one (unlimited). Published as a key
 * change, so every instance's key cache drops the record and the proxy enforces the new limits at once.
 */
export async function setKeyLimits(
  deps: KeyDeps,
  accountId: string | null,
  keyId: string,
  patch: Partial<KeyLimits>,
): Promise<KeyView> {
  const old = await ownedKey(deps, accountId, keyId);
  const rec = await deps.store.setKeyLimits(keyId, mergeKeyLimits(old, patch));
  if (!rec) throw consoleError('key_not_found');
  await deps.bus.publish({ type: 'key_changed', key_id: keyId });
  return toKeyView(rec, deps.now?.());
}
