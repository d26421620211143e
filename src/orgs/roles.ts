/**
 * What each role may do in an organization: the one table every console route asks (docs/teams.md shows
 * it). Acting on a key another member holds needs `manage_keys`; on one's own, `use_keys`.
 */
import { domainError } from '../errors.js';
import type { OrgRole } from '../store/types.js';

export type OrgAction =
  /** See the organization, its members, and its keys and requests (a member: only their own). */
  | 'read'
  /** See every member's keys and requests. */
  | 'read_all'
  /** Create keys, and change, roll and revoke the keys one holds. */
  | 'use_keys'
  /** Change, roll and revoke any key of the organization. */
  | 'manage_keys'
  /** Invite, remove and change the role of members (not owners). */
  | 'manage_members'
  /** See and change alert rules (they carry webhook secrets) and their delivery log. */
  | 'manage_alerts'
  /** Make or unmake owners, rename the organization. */
  | 'own';

const ALLOWED: Record<OrgRole, readonly OrgAction[]> = {
  owner: ['read', 'read_all', 'use_keys', 'manage_keys', 'manage_members', 'manage_alerts', 'own'],
  admin: ['read', 'read_all', 'use_keys', 'manage_keys', 'manage_members', 'manage_alerts'],
  member: ['read', 'use_keys'],
  viewer: ['read', 'read_all'],
};

export function can(role: OrgRole, action: OrgAction): boolean {
  return ALLOWED[role].includes(action);
}

/** 403 forbidden unless the role allows the action. */
export function requireRole(role: OrgRole, action: OrgAction): void {
  if (!can(role, action)) throw domainError('forbidden');
}
