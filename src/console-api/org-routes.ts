/**
 * Organizations, their members and invitations (docs/teams.md). Routes under /orgs/:org act in that
 * organization with the caller's role there; one the caller is not a member of answers 404 org_not_found.
 */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import {
  acceptInvite,
  changeRole,
  checkOrgName,
  createInvite,
  createOrg,
  removeMember,
  setMemberLimits,
  usableInvite,
} from '../orgs/actions.js';
import { requireRole } from '../orgs/roles.js';
import {
  ORG_ROLES,
  type InviteRecord,
  type MemberLimits,
  type Membership,
  type Org,
  type OrgRole,
} from '../store/types.js';
import { requireAccount } from './auth.js';
import { audit } from './audit.js';
import type { ConsoleContext } from './context.js';
import { consoleError } from './errors.js';
import { createdKeyView, memberLimitsView } from './key-routes.js';
import { requireMember } from './org-context.js';
import { parseInput } from './parse.js';

const role = z.enum(ORG_ROLES as [OrgRole, ...OrgRole[]]);
const orgParam = z.object({ org: z.string().min(1).max(100) });
const memberParam = orgParam.extend({ account: z.string().min(1).max(100) });
const inviteParam = orgParam.extend({ id: z.string().min(1).max(100) });
const nameBody = z.object({ name: z.string().max(200) });
const roleBody = z.object({ role });
const removeBody = z.object({ transfer_to: z.string().min(1).max(100).optional() });
const tokenBody = z.object({ token: z.string().min(1).max(200) });
// Ranges are mergeMemberLimits' to check (400 invalid_limits naming the field), as for a key's.
const memberLimitsBody = z
  .object({
    rate_limit_rpm: z.number().nullable(),
    budget_usd: z.number().nullable(),
    budget_period: z.enum(['day', 'month']).nullable(),
    budget_mode: z.enum(['soft', 'hard']),
  })
  .partial()
  .strict();

const limitFacts = (m: Membership, l: MemberLimits) => ({ email: m.email, ...l });

export function orgView(o: Org, r?: OrgRole) {
  return { id: o.id, name: o.name, personal: o.personal_of !== null, created_at: o.created_at, role: r };
}

function inviteView(i: InviteRecord) {
  return {
    id: i.id,
    role: i.role,
    created_by: i.created_by,
    created_at: i.created_at,
    expires_at: i.expires_at,
  };
}

export function registerOrgRoutes(app: FastifyInstance, ctx: ConsoleContext): void {
  app.get('/orgs', async (request, reply) => {
    const account = await requireAccount(ctx, request, reply);
    const orgs = await ctx.configStore.listOrgsOf(account.id);
    return { orgs: orgs.map((o) => orgView(o, o.role)) };
  });

  app.post('/orgs', async (request, reply) => {
    const account = await requireAccount(ctx, request, reply);
    const body = parseInput(nameBody, request.body);
    const org = await createOrg(ctx.keys, account.id, body.name);
    await audit(ctx, request, account, {
      orgId: org.id,
      action: 'org.create',
      target: org.id,
      after: { name: org.name },
    });
    return reply.code(201).send({ org: orgView(org, 'owner') });
  });

  app.get('/orgs/:org', async (request, reply) => {
    const { org } = parseInput(orgParam, request.params);
    const caller = await requireMember(ctx, request, reply, org);
    return { org: orgView((await ctx.configStore.getOrg(caller.orgId))!, caller.role) };
  });

  app.patch('/orgs/:org', async (request, reply) => {
    const { org } = parseInput(orgParam, request.params);
    const caller = await requireMember(ctx, request, reply, org);
    requireRole(caller.role, 'own');
    const body = parseInput(nameBody, request.body);
    const before = await ctx.configStore.getOrg(caller.orgId);
    await ctx.configStore.renameOrg(caller.orgId, checkOrgName(body.name));
    await audit(ctx, request, caller.account, {
      orgId: caller.orgId,
      action: 'org.rename',
      target: caller.orgId,
      before: { name: before?.name },
      after: { name: checkOrgName(body.name) },
    });
    return { org: orgView((await ctx.configStore.getOrg(caller.orgId))!, caller.role) };
  });

  app.get('/orgs/:org/members', async (request, reply) => {
    const { org } = parseInput(orgParam, request.params);
    const caller = await requireMember(ctx, request, reply, org);
    return { members: await ctx.configStore.listMembers(caller.orgId) };
  });

  app.patch('/orgs/:org/members/:account', async (request, reply) => {
    const params = parseInput(memberParam, request.params);
    const caller = await requireMember(ctx, request, reply, params.org);
    const body = parseInput(roleBody, request.body);
    const before = await ctx.configStore.getRole(caller.orgId, params.account);
    const member = await changeRole(ctx.keys, caller, params.account, body.role);
    await audit(ctx, request, caller.account, {
      orgId: caller.orgId,
      action: 'member.role',
      target: params.account,
      before: { role: before, email: member.email },
      after: { role: member.role, email: member.email },
    });
    return { member };
  });

  // A member's limits across their keys: admins read and set anyone's, a member reads their own.
  app.get('/orgs/:org/members/:account/limits', async (request, reply) => {
    const params = parseInput(memberParam, request.params);
    const caller = await requireMember(ctx, request, reply, params.org);
    if (params.account !== caller.accountId) requireRole(caller.role, 'read_all');
    const limits = await ctx.configStore.getMemberLimits(caller.orgId, params.account);
    if (!limits) throw consoleError('member_not_found');
    return memberLimitsView(ctx, caller.orgId, params.account, limits);
  });

  app.patch('/orgs/:org/members/:account/limits', async (request, reply) => {
    const params = parseInput(memberParam, request.params);
    const caller = await requireMember(ctx, request, reply, params.org);
    const body = parseInput(memberLimitsBody, request.body);
    const done = await setMemberLimits(ctx.keys, caller, params.account, body);
    await audit(ctx, request, caller.account, {
      orgId: caller.orgId,
      action: 'member.limits',
      target: params.account,
      before: limitFacts(done.member, done.before),
      after: limitFacts(done.member, done.after),
    });
    return memberLimitsView(ctx, caller.orgId, params.account, done.after);
  });

  app.post('/orgs/:org/members/:account/remove', async (request, reply) => {
    const params = parseInput(memberParam, request.params);
    const caller = await requireMember(ctx, request, reply, params.org);
    const body = parseInput(removeBody, request.body);
    const before = (await ctx.configStore.listMembers(caller.orgId)).find(
      (m) => m.account_id === params.account,
    );
    const done = await removeMember(ctx.keys, caller, params.account, { transferTo: body.transfer_to });
    await audit(ctx, request, caller.account, {
      orgId: caller.orgId,
      action: 'member.remove',
      target: params.account,
      before: before ? { role: before.role, email: before.email } : null,
      after: { revoked: done.revoked, transferred: done.transferred, transfer_to: body.transfer_to ?? null },
    });
    return done;
  });

  app.get('/orgs/:org/invites', async (request, reply) => {
    const { org } = parseInput(orgParam, request.params);
    const caller = await requireMember(ctx, request, reply, org);
    requireRole(caller.role, 'manage_members');
    const invites = await ctx.configStore.listInvites(caller.orgId, ctx.now().toISOString());
    return { invites: invites.map(inviteView) };
  });

  app.post('/orgs/:org/invites', async (request, reply) => {
    const { org } = parseInput(orgParam, request.params);
    const caller = await requireMember(ctx, request, reply, org);
    const body = parseInput(roleBody, request.body);
    const { invite, token } = await createInvite(ctx.keys, caller, body.role);
    await audit(ctx, request, caller.account, {
      orgId: caller.orgId,
      action: 'member.invite',
      target: invite.id,
      after: { role: invite.role, expires_at: invite.expires_at },
    });
    return reply.code(201).send({ invite: inviteView(invite), token });
  });

  app.post('/orgs/:org/invites/:id/revoke', async (request, reply) => {
    const params = parseInput(inviteParam, request.params);
    const caller = await requireMember(ctx, request, reply, params.org);
    requireRole(caller.role, 'manage_members');
    if (!(await ctx.configStore.deleteInvite(caller.orgId, params.id))) throw consoleError('invite_invalid');
    await audit(ctx, request, caller.account, {
      orgId: caller.orgId,
      action: 'invite.revoke',
      target: params.id,
    });
    return reply.code(204).send();
  });

  // What an invitation is for, so its page can say so before the invitee signs up or in.
  app.post('/invites/preview', async (request) => {
    const body = parseInput(tokenBody, request.body);
    const invite = await usableInvite(ctx.keys, body.token);
    const org = (await ctx.configStore.getOrg(invite.org_id))!;
    return { org: { name: org.name }, role: invite.role, expires_at: invite.expires_at };
  });

  app.post('/invites/accept', async (request, reply) => {
    const account = await requireAccount(ctx, request, reply);
    const body = parseInput(tokenBody, request.body);
    const joined = await acceptInvite(ctx.keys, account.id, body.token);
    await audit(ctx, request, account, {
      orgId: joined.org.id,
      action: 'member.join',
      target: account.id,
      after: { role: joined.role, email: account.email, key_id: joined.key?.view.id ?? null },
    });
    return {
      org: orgView(joined.org, joined.role),
      key: joined.key ? createdKeyView(joined.key) : null,
    };
  });
}
