/**
 * Organizations, members and invitations (docs/teams.md). Every account has a personal organization with
 * the account's own id, created with it by the store; other organizations are made here. Role checks are
 * roles.ts'; these functions take the caller's role and refuse what it does not allow.
 */
import { createHash, randomBytes } from 'node:crypto';
import { domainError } from '../errors.js';
import { newId } from '../ids.js';
import { createKey, keyStatus, revokeKey, type CreatedKey, type KeyDeps } from '../keys/actions.js';
import { mergeMemberLimits } from '../limits/settings.js';
import type { InviteRecord, MemberLimits, Membership, Org, OrgRole } from '../store/types.js';
import { can, requireRole } from './roles.js';

/** How long an invitation can be used: long enough to reach someone on leave, short enough to go stale. */
export const INVITE_TTL_MS = 7 * 86_400_000;

/** The longest audit retention one can set: ten years, past any record-keeping rule we know of. */
export const MAX_AUDIT_RETENTION_DAYS = 3650;

export interface Caller {
  accountId: string;
  orgId: string;
  role: OrgRole;
}

export function checkOrgName(name: string): string {
  const trimmed = name.trim();
  if (!trimmed || trimmed.length > 100) throw domainError('invalid_org_name');
  return trimmed;
}

export async function createOrg(deps: KeyDeps, accountId: string, name: string): Promise<Org> {
  return deps.store.createOrg({ id: newId(), name: checkOrgName(name), owner_id: accountId });
}

async function memberOrThrow(deps: KeyDeps, orgId: string, accountId: string): Promise<Membership> {
  const m = (await deps.store.listMembers(orgId)).find((x) => x.account_id === accountId);
  if (!m) throw domainError('member_not_found');
  return m;
}

async function ownerCount(deps: KeyDeps, orgId: string): Promise<number> {
  return (await deps.store.listMembers(orgId)).filter((m) => m.role === 'owner').length;
}

/** Owners are made and unmade only by owners; an organization keeps at least one. */
export async function changeRole(
  deps: KeyDeps,
  caller: Caller,
  accountId: string,
  role: OrgRole,
): Promise<Membership> {
  requireRole(caller.role, 'manage_members');
  const target = await memberOrThrow(deps, caller.orgId, accountId);
  if ((target.role === 'owner' || role === 'owner') && !can(caller.role, 'own')) {
    throw domainError('forbidden');
  }
  if (target.role === 'owner' && role !== 'owner' && (await ownerCount(deps, caller.orgId)) <= 1) {
    throw domainError('last_owner');
  }
  await deps.store.setMember(caller.orgId, accountId, role);
  return { ...target, role };
}

/**
 * Sets a member's limits across their keys (docs/limits.md, "Per member"): a field left out keeps its value,
 * null clears it. Admins set anyone's but an owner's, which only owners set. The store's trigger enters the
 * member's keys in the change feed; they are published on the key bus too, so this instance and (with
 * Redis) every other drops them from its cache at once and reads the new limits with them.
 */
export async function setMemberLimits(
  deps: KeyDeps,
  caller: Caller,
  accountId: string,
  patch: Partial<MemberLimits>,
): Promise<{ member: Membership; before: MemberLimits; after: MemberLimits }> {
  requireRole(caller.role, 'manage_members');
  const target = await memberOrThrow(deps, caller.orgId, accountId);
  if (target.role === 'owner' && !can(caller.role, 'own')) throw domainError('forbidden');
  const after = mergeMemberLimits(target.limits, patch);
  const stored = await deps.store.setMemberLimits(caller.orgId, accountId, after);
  if (!stored) throw domainError('member_not_found');
  for (const k of await deps.store.listOrgKeys(caller.orgId, accountId))
    await deps.bus.publish({ type: 'key_changed', key_id: k.id });
  return { member: { ...target, limits: stored }, before: target.limits, after: stored };
}

/**
 * Removes a member. The keys they hold in the organization are revoked (published on the key bus, so every
 * instance refuses them at once), or handed to `transferTo`, a member who may hold keys.
 */
export async function removeMember(
  deps: KeyDeps,
  caller: Caller,
  accountId: string,
  opts: { transferTo?: string } = {},
): Promise<{ revoked: string[]; transferred: string[] }> {
  requireRole(caller.role, 'manage_members');
  const target = await memberOrThrow(deps, caller.orgId, accountId);
  if (target.role === 'owner' && !can(caller.role, 'own')) throw domainError('forbidden');
  if (target.role === 'owner' && (await ownerCount(deps, caller.orgId)) <= 1) throw domainError('last_owner');
  const orgId = caller.orgId;
  if (opts.transferTo !== undefined) {
    const to = await memberOrThrow(deps, orgId, opts.transferTo);
    if (to.account_id === accountId || !can(to.role, 'use_keys')) {
      throw domainError('member_not_found', 'Keys can go only to another member who may hold keys.');
    }
    // The membership goes first: from here on the removed member can act on nothing in the organization.
    await deps.store.removeMember(orgId, accountId);
    const transferred = await deps.store.transferKeys(orgId, accountId, to.account_id);
    for (const id of transferred) await deps.bus.publish({ type: 'key_changed', key_id: id });
    return { revoked: [], transferred };
  }
  await deps.store.removeMember(orgId, accountId);
  const now = deps.now?.() ?? new Date();
  const revoked: string[] = [];
  for (const k of await deps.store.listOrgKeys(orgId, accountId)) {
    if (keyStatus(k, now) === 'revoked') continue;
    await revokeKey(deps, { orgId, accountId }, k.id);
    revoked.push(k.id);
  }
  return { revoked, transferred: [] };
}

const hashToken = (token: string) => createHash('sha256').update(token).digest('hex');
/** base64url of 32 bytes: the only shape an invitation token has. */
const TOKEN_PATTERN = /^[A-Za-z0-9_-]{43}$/;

/** An invitation and its token; the token is returned here once and never stored. */
export async function createInvite(
  deps: KeyDeps,
  caller: Caller,
  role: OrgRole,
): Promise<{ invite: InviteRecord; token: string }> {
  requireRole(caller.role, 'manage_members');
  if (role === 'owner' && !can(caller.role, 'own')) throw domainError('forbidden');
  const token = randomBytes(32).toString('base64url');
  const now = deps.now?.() ?? new Date();
  const invite = await deps.store.createInvite({
    id: newId(),
    org_id: caller.orgId,
    token_hash: hashToken(token),
    role,
    created_by: caller.accountId,
    expires_at: new Date(now.getTime() + INVITE_TTL_MS).toISOString(),
  });
  return { invite, token };
}

/** The usable invitation a token names, or invite_invalid (unknown, used and expired alike). */
export async function usableInvite(deps: KeyDeps, token: string): Promise<InviteRecord> {
  const invite = TOKEN_PATTERN.test(token) ? await deps.store.getInviteByHash(hashToken(token)) : null;
  const now = deps.now?.() ?? new Date();
  if (!invite || invite.used_at !== null || Date.parse(invite.expires_at) <= now.getTime()) {
    throw domainError('invite_invalid');
  }
  return invite;
}

/**
 * Joins the invitation's organization with its role; the invitation is used up by exactly one caller. A
 * role that may hold keys gets a `default` key there, returned in full once.
 */
export async function acceptInvite(
  deps: KeyDeps,
  accountId: string,
  token: string,
): Promise<{ org: Org; role: OrgRole; key: CreatedKey | null }> {
  const invite = await usableInvite(deps, token);
  if (await deps.store.getRole(invite.org_id, accountId)) throw domainError('already_member');
  const now = deps.now?.() ?? new Date();
  const claimed = await deps.store.claimInvite(hashToken(token), accountId, now.toISOString());
  if (!claimed) throw domainError('invite_invalid');
  await deps.store.setMember(claimed.org_id, accountId, claimed.role);
  const org = (await deps.store.getOrg(claimed.org_id))!;
  const key = can(claimed.role, 'use_keys')
    ? await createKey(deps, { accountId, orgId: claimed.org_id, name: 'default' })
    : null;
  return { org, role: claimed.role, key };
}
