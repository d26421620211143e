/**
 * Which organization a console request acts in, and the caller's role there. Routes under /orgs/:org name
 * it in the path; the others (keys, requests, usage) take the `x-keyrelay-org` header and default to the
 * caller's personal organization (its id is the account's). Not a member answers as if it did not exist.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { domainError } from '../errors.js';
import type { Caller } from '../orgs/actions.js';
import { can } from '../orgs/roles.js';
import type { Account, ApiTokenScope } from '../store/types.js';
import type { KeyScope } from '../keys/actions.js';
import { requireAccount } from './auth.js';
import type { ConsoleContext } from './context.js';

export const ORG_HEADER = 'x-keyrelay-org';
const ORG_ID = /^[0-9A-Za-z_-]{1,64}$/;

export interface OrgCaller extends Caller {
  account: Account;
}

export async function requireMember(
  ctx: ConsoleContext,
  request: FastifyRequest,
  reply: FastifyReply,
  orgId?: string,
  /** What an API token must be allowed to read here; without it a token is refused (token_scope). */
  tokenScope?: ApiTokenScope,
): Promise<OrgCaller> {
  const account = await requireAccount(ctx, request, reply, tokenScope);
  const header = request.headers[ORG_HEADER];
  const id = orgId ?? (typeof header === 'string' && header !== '' ? header : account.id);
  const role = ORG_ID.test(id) ? await ctx.configStore.getRole(id, account.id) : null;
  if (!role) throw domainError('org_not_found');
  return { account, accountId: account.id, orgId: id, role };
}

/** The keys (and request rows) a caller sees: all of the organization's, or only their own. */
export function visibleScope(c: Caller): { orgId: string; accountId?: string } {
  return can(c.role, 'read_all') ? { orgId: c.orgId } : { orgId: c.orgId, accountId: c.accountId };
}

/** The keys a caller may change: any in the organization for admins, their own for members, none for viewers. */
export function writableScope(c: Caller): KeyScope {
  if (can(c.role, 'manage_keys')) return { orgId: c.orgId };
  if (can(c.role, 'use_keys')) return { orgId: c.orgId, accountId: c.accountId };
  throw domainError('forbidden');
}
