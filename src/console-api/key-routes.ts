/**
 * Keys in the caller's organization: list, create, rename, set limits, roll, revoke. A member sees and changes
 * the keys they hold, an admin every key, a viewer reads all; a key outside that answers 404.
 */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { consoleError } from './errors.js';
import { PROVIDER_NAME } from '../providers/index.js';
import {
  checkKeyName,
  createKey,
  renameKey,
  revokeKey,
  rollKey,
  setKeyLimits,
  toKeyView,
  type CreatedKey,
} from '../keys/actions.js';
import { memberSpendSince, readBudgetStatus, readMemberBudgetStatus } from '../limits/index.js';
import type { KeyBudgetStatus, KeyLimits, KeyRateStatus, KeyView, MemberLimits } from '../store/types.js';
import { audit, keyFacts } from './audit.js';
import type { ConsoleContext } from './context.js';
import { requireMember, visibleScope, writableScope } from './org-context.js';
import { requireRole } from '../orgs/roles.js';
import { idParam, isoTime, parseInput } from './parse.js';

/** The only shape in which a full key leaves the server: the response that created it. */
export function createdKeyView(k: CreatedKey): KeyView & { key: string } {
  return { ...k.view, key: k.key };
}

// Types here; ranges are setKeyLimits' to check (400 invalid_limits), so CLI and console answer alike.
const limitFields = {
  // Which names are providers is setKeyLimits' to check: named upstreams are configuration.
  allowed_providers: z.array(z.string().regex(PROVIDER_NAME)).max(40).nullable().optional(),
  allowed_models: z.array(z.string().max(1000)).max(1000).nullable().optional(),
  rate_limit_rpm: z.number().nullable().optional(),
  budget_usd: z.number().nullable().optional(),
  budget_period: z.enum(['day', 'month']).nullable().optional(),
  budget_mode: z.enum(['soft', 'hard']).optional(),
  rate_limit_tpm: z.number().nullable().optional(),
  max_concurrent: z.number().nullable().optional(),
  rate_limit_scope: z.enum(['billable', 'all']).optional(),
  budget_unpriced: z.enum(['refuse', 'allow']).optional(),
  user_rate_limit_rpm: z.number().nullable().optional(),
  user_budget_usd: z.number().nullable().optional(),
  user_budget_period: z.enum(['day', 'month']).nullable().optional(),
  user_budget_mode: z.enum(['soft', 'hard']).optional(),
};
const createBody = z.object({
  name: z.string().max(200),
  /** The organization's key, held by no member: owners and admins only. */
  service: z.boolean().optional(),
  expires_at: isoTime.nullable().optional(),
  ...limitFields,
});
const patchBody = z.object({ name: z.string().max(200).optional(), ...limitFields });

/** The limit fields present in a body (undefined = absent = unchanged). */
function limitsOf(body: Partial<KeyLimits>): Partial<KeyLimits> | null {
  const out: Partial<KeyLimits> = {};
  let any = false;
  for (const k of Object.keys(limitFields) as (keyof KeyLimits)[]) {
    if (body[k] !== undefined) {
      (out as Record<string, unknown>)[k] = body[k];
      any = true;
    }
  }
  return any ? out : null;
}
// Range and integrality are rollKey's to check (400 invalid_grace), so CLI and console answer alike.
const rollBody = z.object({ grace_seconds: z.number() });

/** A member's limits across their keys and their budget's spend in its period now (null without a budget). */
export async function memberLimitsView(
  ctx: ConsoleContext,
  orgId: string,
  accountId: string,
  limits: MemberLimits,
): Promise<{ limits: MemberLimits; budget: KeyBudgetStatus | null }> {
  const spend = memberSpendSince(ctx.configStore, ctx.logStore);
  return { limits, budget: await readMemberBudgetStatus(spend, orgId, accountId, limits, ctx.now()) };
}

export function registerKeyRoutes(app: FastifyInstance, ctx: ConsoleContext): void {
  app.get('/keys', async (request, reply) => {
    const caller = await requireMember(ctx, request, reply);
    const now = ctx.now();
    const scope = visibleScope(caller);
    const keys = (await ctx.configStore.listOrgKeys(scope.orgId, scope.accountId))
      .sort((a, b) => b.created_at.localeCompare(a.created_at) || b.id.localeCompare(a.id))
      .map((k) => toKeyView(k, now));
    // Spent so far in each usable key's budget period, by key id (keys without a budget are left out).
    const budgets: Record<string, KeyBudgetStatus> = {};
    // Likewise the headroom of each usable key's rpm and tpm limits.
    const rates: Record<string, KeyRateStatus> = {};
    for (const k of keys) {
      if (k.status === 'revoked' || k.status === 'expired') continue;
      const status = await readBudgetStatus(ctx.logStore, k, now);
      if (status) budgets[k.id] = status;
      const rate = ctx.rateStatus ? await ctx.rateStatus(k) : null;
      if (rate) rates[k.id] = rate;
    }
    // The caller's own limits across their keys, when an admin set any.
    const mine = await ctx.configStore.getMemberLimits(caller.orgId, caller.accountId);
    const member =
      mine && (mine.rate_limit_rpm !== null || mine.budget_usd !== null)
        ? await memberLimitsView(ctx, caller.orgId, caller.accountId, mine)
        : null;
    return { keys, budgets, rates, member };
  });

  app.post('/keys', async (request, reply) => {
    const caller = await requireMember(ctx, request, reply);
    requireRole(caller.role, 'use_keys');
    const body = parseInput(createBody, request.body);
    if (body.service) requireRole(caller.role, 'manage_keys');
    if (body.expires_at && Date.parse(body.expires_at) <= ctx.now().getTime()) {
      throw consoleError('invalid_expiry');
    }
    const created = await createKey(ctx.keys, {
      accountId: caller.accountId,
      orgId: caller.orgId,
      service: body.service ?? false,
      name: body.name,
      expiresAt: body.expires_at,
      limits: limitsOf(body) ?? undefined,
    });
    await audit(ctx, request, caller.account, {
      orgId: caller.orgId,
      action: 'key.create',
      target: created.view.id,
      after: keyFacts(created.view),
    });
    return reply.code(201).send({ key: createdKeyView(created) });
  });

  app.patch('/keys/:id', async (request, reply) => {
    const caller = await requireMember(ctx, request, reply);
    const scope = writableScope(caller);
    const { id } = parseInput(idParam, request.params);
    const body = parseInput(patchBody, request.body);
    const limits = limitsOf(body);
    if (body.name === undefined && !limits) throw consoleError('invalid_request', 'Nothing to change.');
    // The name is checked before anything is written, so a bad one never leaves the limits half-applied.
    if (body.name !== undefined) checkKeyName(body.name);
    const before = await ctx.configStore.getKey(id);
    let key = limits ? await setKeyLimits(ctx.keys, scope, id, limits) : null;
    if (body.name !== undefined) key = await renameKey(ctx.keys, scope, id, body.name);
    await audit(ctx, request, caller.account, {
      orgId: caller.orgId,
      action: limits ? 'key.limits' : 'key.rename',
      target: id,
      before: before && keyFacts(before),
      after: key && keyFacts(key),
    });
    return { key };
  });

  app.post('/keys/:id/roll', async (request, reply) => {
    const caller = await requireMember(ctx, request, reply);
    const scope = writableScope(caller);
    const { id } = parseInput(idParam, request.params);
    const body = parseInput(rollBody, request.body);
    const { created, old } = await rollKey(ctx.keys, scope, id, body.grace_seconds);
    await audit(ctx, request, caller.account, {
      orgId: caller.orgId,
      action: 'key.roll',
      target: id,
      before: keyFacts(old),
      after: { ...keyFacts(created.view), new_key_id: created.view.id },
    });
    return reply.code(201).send({ key: createdKeyView(created), old });
  });

  app.post('/keys/:id/revoke', async (request, reply) => {
    const caller = await requireMember(ctx, request, reply);
    const scope = writableScope(caller);
    const { id } = parseInput(idParam, request.params);
    const key = await revokeKey(ctx.keys, scope, id);
    await audit(ctx, request, caller.account, {
      orgId: caller.orgId,
      action: 'key.revoke',
      target: id,
      after: keyFacts(key),
    });
    return { key };
  });
}
