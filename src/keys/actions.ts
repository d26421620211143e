/**
 * Key domain actions shared by the CLI and the console API. Every change that can make a key stop working
 * is published on the key event bus so every instance's verification cache drops it.
 */
import { domainError } from '../errors.js';
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

/** The name as stored (trimmed), or `invalid_name`. */
export function checkKeyName(name: string): string {
  const trimmed = name.trim();
  if (!trimmed || trimmed.length > 100) throw domainError('invalid_name');
  return trimmed;
}

export interface CreatedKey {
  view: KeyView;
  /** The full key: returned once, at creation, never stored. */
  key: string;
}

/**
 * Which keys a caller may act on: those of one organization, and of one member there when accountId is set.
 * null = operator (CLI): any key.
 */
export type KeyScope = { orgId: string; accountId?: string } | null;

export async function createKey(
  deps: KeyDeps,
  input: {
    accountId: string;
    /** The owning organization; the account's personal one by default. */
    orgId?: string;
    /** The organization's key, held by nobody (accountId is then who created it). */
    service?: boolean;
    name: string;
    expiresAt?: string | null;
    limits?: Partial<KeyLimits>;
  },
): Promise<CreatedKey> {
  const name = checkKeyName(input.name);
  const limits = input.limits ? mergeKeyLimits(null, input.limits) : null;
  const key = generateKey();
  let rec = await deps.store.createKey({
    id: newId(),
    account_id: input.accountId,
    org_id: input.orgId ?? input.accountId,
    service: input.service ?? false,
    name,
    hash: hashKey(key),
    hint: keyHint(key),
    expires_at: input.expiresAt ?? null,
  });
  // Nobody holds the new key yet, so setting its limits in a second write opens no unlimited window.
  if (limits) rec = (await deps.store.setKeyLimits(rec.id, limits)) ?? rec;
  return { view: toKeyView(rec, deps.now?.()), key };
}

/** Whether the key is in the scope. A service key is in no member's: only an organization-wide scope has it. */
export function inScope(k: KeyRecord, scope: KeyScope): boolean {
  if (scope === null) return true;
  if (k.org_id !== scope.orgId) return false;
  return scope.accountId === undefined || (!k.service && k.account_id === scope.accountId);
}

async function ownedKey(deps: KeyDeps, scope: KeyScope, keyId: string): Promise<KeyRecord> {
  const k = await deps.store.getKey(keyId);
  // A key outside the scope answers exactly like a missing one.
  if (!k || !inScope(k, scope)) throw domainError('key_not_found');
  return k;
}

export async function revokeKey(deps: KeyDeps, scope: KeyScope, keyId: string): Promise<KeyView> {
  await ownedKey(deps, scope, keyId);
  const now = deps.now?.() ?? new Date();
  const rec = await deps.store.revokeKey(keyId, now.toISOString());
  if (!rec) throw domainError('key_not_found');
  await deps.bus.publish({ type: 'key_changed', key_id: keyId });
  return toKeyView(rec, now);
}

export async function renameKey(
  deps: KeyDeps,
  scope: KeyScope,
  keyId: string,
  name: string,
): Promise<KeyView> {
  await ownedKey(deps, scope, keyId);
  await deps.store.renameKey(keyId, checkKeyName(name));
  return toKeyView((await deps.store.getKey(keyId))!, deps.now?.());
}

/** Roll: a new key with the same name, and the old one expiring after the grace period (0–24 h). */
export async function rollKey(
  deps: KeyDeps,
  scope: KeyScope,
  keyId: string,
  graceSeconds: number,
): Promise<{ created: CreatedKey; old: KeyView }> {
  if (!Number.isInteger(graceSeconds) || graceSeconds < 0 || graceSeconds > MAX_ROLL_GRACE_SECONDS) {
    throw domainError('invalid_grace');
  }
  const old = await ownedKey(deps, scope, keyId);
  const now = deps.now?.() ?? new Date();
  if (keyStatus(old, now) !== 'active') throw domainError('key_not_active');
  // The new key inherits the old one's limits (rolling must never lift them), holder, organization and kind.
  const limits = pickLimits(old);
  const created = await createKey(deps, {
    accountId: old.account_id,
    orgId: old.org_id,
    service: old.service,
    name: old.name,
    limits,
  });
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
  scope: KeyScope,
  keyId: string,
  patch: Partial<KeyLimits>,
): Promise<KeyView> {
  const old = await ownedKey(deps, scope, keyId);
  const rec = await deps.store.setKeyLimits(keyId, mergeKeyLimits(old, patch));
  if (!rec) throw domainError('key_not_found');
  await deps.bus.publish({ type: 'key_changed', key_id: keyId });
  return toKeyView(rec, deps.now?.());
}
