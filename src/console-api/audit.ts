/**
 * The audit log as the console writes and reads it (docs/teams.md): each change a console route makes in an
 * organization, and each sign-in, as one append-only entry with who, when, from where and what changed.
 * What changed is names, roles, holders and limits: never a key, token, password or hash.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { newId } from '../ids.js';
import { pickLimits } from '../limits/settings.js';
import { MAX_AUDIT_RETENTION_DAYS } from '../orgs/actions.js';
import { requireRole } from '../orgs/roles.js';
import type { Account, AuditEntry, KeyRecord } from '../store/types.js';
import type { ConsoleContext } from './context.js';
import { requireMember } from './org-context.js';
import { isoTime, parseInput, queryInt } from './parse.js';

/** What an entry may say about a key. */
export function keyFacts(k: KeyRecord): Record<string, unknown> {
  return {
    name: k.name,
    holder: k.service ? null : k.account_id,
    service: k.service,
    revoked_at: k.revoked_at,
    expires_at: k.expires_at,
    ...pickLimits(k),
  };
}

export async function audit(
  ctx: ConsoleContext,
  request: FastifyRequest,
  actor: Pick<Account, 'id' | 'email'> | null,
  e: {
    orgId: string;
    action: string;
    target?: string | null;
    before?: Record<string, unknown> | null;
    after?: Record<string, unknown> | null;
  },
): Promise<void> {
  const ua = request.headers['user-agent'];
  await ctx.configStore.appendAudit({
    id: newId(),
    org_id: e.orgId,
    at: ctx.now().toISOString(),
    actor_id: actor?.id ?? null,
    actor_email: actor?.email ?? null,
    action: e.action,
    target: e.target ?? null,
    ip: request.ip,
    user_agent: typeof ua === 'string' ? ua.slice(0, 512) : null,
    before: e.before ?? null,
    after: e.after ?? null,
  });
}

/** A sign-in, success or failure, in every organization of the account it names. */
export async function auditSignIn(
  ctx: ConsoleContext,
  request: FastifyRequest,
  account: Pick<Account, 'id' | 'email'>,
  ok: boolean,
): Promise<void> {
  for (const org of await ctx.configStore.listOrgsOf(account.id)) {
    await audit(ctx, request, ok ? account : null, {
      orgId: org.id,
      action: ok ? 'sign_in' : 'sign_in_failed',
      target: account.id,
      after: ok ? null : { email: account.email },
    });
  }
}

const orgParam = z.object({ org: z.string().min(1).max(100) });
const auditQuery = z.object({
  action: z.string().min(1).max(64).optional(),
  actor: z.string().min(1).max(320).optional(),
  from: isoTime.optional(),
  to: isoTime.optional(),
  cursor: z.string().min(1).max(100).optional(),
  limit: queryInt(1, 500).default(100),
});
const retentionBody = z.object({
  retention_days: z.number().int().min(1).max(MAX_AUDIT_RETENTION_DAYS).nullable(),
});
/** An export reads at most this many entries: a bound on one request's work, far past a year of a team's. */
const EXPORT_MAX = 100_000;
const EXPORT_PAGE = 1_000;

export function registerAuditRoutes(app: FastifyInstance, ctx: ConsoleContext): void {
  async function scope(request: FastifyRequest, reply: Parameters<typeof requireMember>[2]) {
    const { org } = parseInput(orgParam, request.params);
    const caller = await requireMember(ctx, request, reply, org);
    requireRole(caller.role, 'manage_members');
    const q = parseInput(auditQuery, request.query);
    return {
      q,
      filter: {
        org_id: caller.orgId,
        action: q.action,
        actor_email: q.actor?.toLowerCase(),
        from: q.from,
        to: q.to,
      },
    };
  }

  app.get('/orgs/:org/audit', async (request, reply) => {
    const { q, filter } = await scope(request, reply);
    const entries = await ctx.configStore.listAudit({ ...filter, before_id: q.cursor, limit: q.limit + 1 });
    const page = entries.slice(0, q.limit);
    return { entries: page, next_cursor: entries.length > q.limit ? page.at(-1)!.id : null };
  });

  // How long the organization keeps its entries: read by whoever reads the log, set by an owner (the log is
  // what an owner answers for). The hourly retention job deletes what is older (src/log/retention.ts).
  app.get('/orgs/:org/audit/retention', async (request, reply) => {
    const { org } = parseInput(orgParam, request.params);
    const caller = await requireMember(ctx, request, reply, org);
    requireRole(caller.role, 'manage_members');
    return { retention_days: await ctx.configStore.getAuditRetention(caller.orgId) };
  });

  app.put('/orgs/:org/audit/retention', async (request, reply) => {
    const { org } = parseInput(orgParam, request.params);
    const caller = await requireMember(ctx, request, reply, org);
    requireRole(caller.role, 'own');
    const body = parseInput(retentionBody, request.body);
    const before = await ctx.configStore.getAuditRetention(caller.orgId);
    await ctx.configStore.setAuditRetention(caller.orgId, body.retention_days);
    await audit(ctx, request, caller.account, {
      orgId: caller.orgId,
      action: 'org.audit_retention',
      target: caller.orgId,
      before: { retention_days: before },
      after: { retention_days: body.retention_days },
    });
    return { retention_days: body.retention_days };
  });

  app.get('/orgs/:org/audit/export', async (request, reply) => {
    const { filter } = await scope(request, reply);
    const lines: string[] = [];
    let before: string | undefined;
    while (lines.length < EXPORT_MAX) {
      const page: AuditEntry[] = await ctx.configStore.listAudit({
        ...filter,
        before_id: before,
        limit: EXPORT_PAGE,
      });
      for (const e of page) lines.push(JSON.stringify(e));
      if (page.length < EXPORT_PAGE) break;
      before = page.at(-1)!.id;
    }
    return reply
      .header('content-type', 'application/x-ndjson; charset=utf-8')
      .header('content-disposition', 'attachment; filename="keyrelay-audit.ndjson"')
      .send(lines.map((l) => `${l}\n`).join(''));
  });
}
