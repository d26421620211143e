/**
 * GET /reconcile?day=YYYY-MM-DD: keyrelay's logged cost and tokens beside each provider's cost and usage
 * reports for a day (reconcile/); PUT and DELETE /reconcile/links/:provider/:api_key_id: the tie between a
 * provider's API key id and a credential keyrelay saw (by fingerprint). The install's owner only: the admin
 * key reads the provider organization's whole bill, and the comparison spans every account's rows, which no
 * organization's owner may otherwise see.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { isInstallOwner } from '../accounts/signup-policy.js';
import { domainError } from '../errors.js';
import type { Metrics } from '../metrics.js';
import {
  BILLING_PROVIDERS,
  defaultDay,
  parseDay,
  reconcileDay,
  relinkProviderKey,
  type BillingProvider,
  type Reconciliation,
} from '../reconcile/index.js';
import { audit } from './audit.js';
import { requireAccount } from './auth.js';
import type { ConsoleContext } from './context.js';
import { consoleError } from './errors.js';
import { parseInput } from './parse.js';

const query = z.object({ day: z.string().optional() });
const linkParams = z.object({
  provider: z.enum(BILLING_PROVIDERS as [BillingProvider, ...BillingProvider[]]),
  // The providers' key ids ("key_…", "apikey_…"): short, without spaces.
  api_key_id: z.string().regex(/^[0-9A-Za-z_-]{1,128}$/),
});
const linkBody = z.object({ fingerprint: z.string().regex(/^[0-9a-f]{32}$/) });

export function registerReconcileRoute(app: FastifyInstance, ctx: ConsoleContext, metrics?: Metrics): void {
  // One read of the providers' reports per day at a time: a second ask while one runs shares it.
  const running = new Map<string, Promise<Reconciliation>>();

  const owner = async (request: FastifyRequest, reply: FastifyReply) => {
    const account = await requireAccount(ctx, request, reply);
    if (!(await isInstallOwner(ctx.configStore, account.id))) throw domainError('forbidden');
    return account;
  };

  /** Sets or removes a link, audited in the owner's own organization (the install has no other place). */
  const link = async (
    request: FastifyRequest,
    account: { id: string; email: string },
    provider: BillingProvider,
    apiKeyId: string,
    fingerprint: string | null,
  ) => {
    const before = await relinkProviderKey(ctx.configStore, provider, apiKeyId, fingerprint);
    await audit(ctx, request, account, {
      orgId: account.id,
      action: 'reconcile.link',
      target: `${provider}:${apiKeyId}`,
      before: { fingerprint: before },
      after: { fingerprint },
    });
  };

  app.get('/reconcile', async (request, reply) => {
    await owner(request, reply);
    const q = parseInput(query, request.query);
    const now = ctx.now();
    const day = q.day === undefined ? defaultDay(now) : parseDay(q.day, now);
    if (day === null)
      throw consoleError('invalid_time', '`day` must be a date (YYYY-MM-DD, UTC) that has begun.');
    let pending = running.get(day);
    if (!pending) {
      pending = reconcileDay(ctx.config, ctx, day, now).finally(() => running.delete(day));
      running.set(day, pending);
    }
    const result = await pending;
    for (const p of result.providers) {
      if (p.error !== null || p.usage_error !== null) metrics?.reconcileErrors.inc({ provider: p.provider });
      if (p.difference_usd !== null)
        metrics?.reconcileDifference.set({ provider: p.provider }, p.difference_usd);
      for (const t of p.tokens)
        metrics?.reconcileTokenDifference.set({ provider: p.provider, kind: t.kind }, t.difference);
    }
    return result;
  });

  app.put('/reconcile/links/:provider/:api_key_id', async (request, reply) => {
    const account = await owner(request, reply);
    const { provider, api_key_id } = parseInput(linkParams, request.params);
    const { fingerprint } = parseInput(linkBody, request.body);
    await link(request, account, provider, api_key_id, fingerprint);
    return { provider, api_key_id, fingerprint };
  });

  app.delete('/reconcile/links/:provider/:api_key_id', async (request, reply) => {
    const account = await owner(request, reply);
    const { provider, api_key_id } = parseInput(linkParams, request.params);
    await link(request, account, provider, api_key_id, null);
    return reply.code(204).send();
  });
}
