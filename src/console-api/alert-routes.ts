/**
 * An organization's alert rules and their delivery log (docs/alerts.md). Owners and admins only: a rule
 * carries its webhook's signing secret. A webhook URL is checked when the rule is saved (and again before
 * each delivery): keyrelay itself, loopback and private addresses are refused unless the instance allows them.
 */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { checkTarget, newAlertRule, parseAlertRuleInput, privateTargetsAllowed } from '../alerts/index.js';
import { domainError } from '../errors.js';
import { requireRole } from '../orgs/roles.js';
import type { AlertRule } from '../store/alert-types.js';
import { audit } from './audit.js';
import type { ConsoleContext } from './context.js';
import { requireMember } from './org-context.js';
import { parseInput, queryInt } from './parse.js';

const orgParam = z.object({ org: z.string().min(1).max(64) });
const ruleParam = z.object({ org: z.string().min(1).max(64), id: z.string().min(1).max(64) });
const toggleBody = z.object({ enabled: z.boolean() }).strict();
const deliveriesQuery = z.object({ limit: queryInt(1, 500).optional() }).strict();

/** What the audit log keeps of a rule: never its secret. */
function ruleFacts(r: AlertRule): Record<string, unknown> {
  return {
    name: r.name,
    kind: r.kind,
    scope: r.scope,
    scope_id: r.scope_id,
    url: r.url,
    format: r.format,
    enabled: r.enabled,
  };
}

export function registerAlertRoutes(app: FastifyInstance, ctx: ConsoleContext): void {
  app.get('/orgs/:org/alerts', async (request, reply) => {
    const { org } = parseInput(orgParam, request.params);
    const caller = await requireMember(ctx, request, reply, org);
    requireRole(caller.role, 'manage_alerts');
    return { rules: await ctx.configStore.listAlertRules(caller.orgId) };
  });

  app.post('/orgs/:org/alerts', async (request, reply) => {
    const { org } = parseInput(orgParam, request.params);
    const caller = await requireMember(ctx, request, reply, org);
    requireRole(caller.role, 'manage_alerts');
    const input = parseAlertRuleInput(request.body);
    if (input.scope === 'member' && !(await ctx.configStore.getRole(caller.orgId, input.scope_id!)))
      throw domainError('member_not_found');
    if (input.scope === 'key') {
      const key = await ctx.configStore.getKey(input.scope_id!);
      if (key?.org_id !== caller.orgId) throw domainError('key_not_found');
    }
    await checkTarget(input.url, {
      allowPrivate: await privateTargetsAllowed(ctx.configStore),
      lookup: ctx.config.alerts?.lookup,
      publicUrl: ctx.config.publicUrl,
      port: request.socket.localPort ?? ctx.config.port,
    });
    const rule = newAlertRule(caller.orgId, caller.accountId, input, ctx.now());
    await ctx.configStore.createAlertRule(rule);
    await audit(ctx, request, caller.account, {
      orgId: caller.orgId,
      action: 'alert.create',
      target: rule.id,
      after: ruleFacts(rule),
    });
    return reply.code(201).send(rule);
  });

  app.patch('/orgs/:org/alerts/:id', async (request, reply) => {
    const { org, id } = parseInput(ruleParam, request.params);
    const caller = await requireMember(ctx, request, reply, org);
    requireRole(caller.role, 'manage_alerts');
    const { enabled } = parseInput(toggleBody, request.body);
    const rule = await ctx.configStore.setAlertRuleEnabled(caller.orgId, id, enabled);
    if (!rule) throw domainError('alert_rule_not_found');
    await audit(ctx, request, caller.account, {
      orgId: caller.orgId,
      action: 'alert.change',
      target: id,
      after: ruleFacts(rule),
    });
    return rule;
  });

  app.delete('/orgs/:org/alerts/:id', async (request, reply) => {
    const { org, id } = parseInput(ruleParam, request.params);
    const caller = await requireMember(ctx, request, reply, org);
    requireRole(caller.role, 'manage_alerts');
    if (!(await ctx.configStore.deleteAlertRule(caller.orgId, id))) throw domainError('alert_rule_not_found');
    await audit(ctx, request, caller.account, {
      orgId: caller.orgId,
      action: 'alert.delete',
      target: id,
    });
    return reply.code(204).send();
  });

  app.get('/orgs/:org/alert-deliveries', async (request, reply) => {
    const { org } = parseInput(orgParam, request.params);
    const caller = await requireMember(ctx, request, reply, org);
    requireRole(caller.role, 'manage_alerts');
    const q = parseInput(deliveriesQuery, request.query);
    return { deliveries: await ctx.configStore.listAlertDeliveries(caller.orgId, q.limit ?? 100) };
  });
}
