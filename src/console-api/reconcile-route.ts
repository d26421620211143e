/**
 * GET /reconcile?day=YYYY-MM-DD: keyrelay's logged cost beside each provider's cost report for a day
 * (reconcile/). The install's owner only: the admin key reads the provider organization's whole bill, and
 * the comparison spans every account's rows, which no organization's owner may otherwise see.
 */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { isInstallOwner } from '../accounts/signup-policy.js';
import { domainError } from '../errors.js';
import type { Metrics } from '../metrics.js';
import { defaultDay, parseDay, reconcileDay, type Reconciliation } from '../reconcile/index.js';
import { requireAccount } from './auth.js';
import type { ConsoleContext } from './context.js';
import { consoleError } from './errors.js';
import { parseInput } from './parse.js';

const query = z.object({ day: z.string().optional() });

export function registerReconcileRoute(app: FastifyInstance, ctx: ConsoleContext, metrics?: Metrics): void {
  // One read of the providers' reports per day at a time: a second ask while one runs shares it.
  const running = new Map<string, Promise<Reconciliation>>();

  app.get('/reconcile', async (request, reply) => {
    const account = await requireAccount(ctx, request, reply);
    if (!(await isInstallOwner(ctx.configStore, account.id))) throw domainError('forbidden');
    const q = parseInput(query, request.query);
    const now = ctx.now();
    const day = q.day === undefined ? defaultDay(now) : parseDay(q.day, now);
    if (day === null)
      throw consoleError('invalid_time', '`day` must be a date (YYYY-MM-DD, UTC) that has begun.');
    let pending = running.get(day);
    if (!pending) {
      pending = reconcileDay(ctx.config, ctx.logStore, day, now).finally(() => running.delete(day));
      running.set(day, pending);
    }
    const result = await pending;
    for (const p of result.providers) {
      if (p.error !== null) metrics?.reconcileErrors.inc({ provider: p.provider });
      else if (p.difference_usd !== null)
        metrics?.reconcileDifference.set({ provider: p.provider }, p.difference_usd);
    }
    return result;
  });
}
