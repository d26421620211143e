/** Request log and usage of the calling account, straight from the LogStore's query methods. */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { consoleError } from './errors.js';
import type { RequestFilter } from '../store/types.js';
import { requireAccount } from './auth.js';
import type { ConsoleContext } from './context.js';
import { idParam, isoTime, parseInput, queryInt } from './parse.js';

const DAY_MS = 86_400_000;
const BUCKET_MS = { minute: 60_000, hour: 3_600_000, day: DAY_MS } as const;
/** A chart never needs more points than this; larger ranges must pick a coarser bucket. */
const MAX_BUCKETS = 10_000;

const text = z.string().min(1).max(200);
const commonFilters = {
  key_id: text.optional(),
  provider: z.enum(['openai', 'anthropic']).optional(),
  model: text.optional(),
  from: isoTime.optional(),
  to: isoTime.optional(),
};

const requestsQuery = z.object({
  ...commonFilters,
  status: queryInt(0, 999).optional(),
  outcome: z.enum(['ok', 'upstream_error', 'client_aborted', 'timeout', 'refused']).optional(),
  property: z
    .string()
    .max(400)
    .regex(/^[^:]+:/, 'must be name:value')
    .optional(),
  connection_id: z
    .string()
    .regex(/^[0-9A-Za-z]{1,64}$/)
    .optional(),
  // Words to find in model, path, end user, session and stored bodies.
  q: z.string().max(200).optional(),
  limit: queryInt(1, 200).default(50),
  cursor: z.string().min(1).max(200).optional(),
});
const seriesQuery = z.object({ ...commonFilters, bucket: z.enum(['minute', 'hour', 'day']).default('hour') });
const breakdownQuery = z.object({
  ...commonFilters,
  by: z.enum(['model', 'key_id', 'provider']).default('model'),
});

type Common = {
  key_id?: string;
  provider?: 'openai' | 'anthropic';
  model?: string;
  from?: string;
  to?: string;
};

function toFilter(accountId: string, q: Common): RequestFilter {
  const f: RequestFilter = { account_id: accountId };
  if (q.key_id) f.key_id = q.key_id;
  if (q.provider) f.provider = q.provider;
  if (q.model) f.model = q.model;
  if (q.from) f.from = q.from;
  if (q.to) f.to = q.to;
  return f;
}

/** Usage defaults to the last 24 h: `to` = now, `from` = `to` − 24 h. */
function usageFilter(
  ctx: ConsoleContext,
  accountId: string,
  q: Common,
): RequestFilter & { from: string; to: string } {
  const to = q.to ?? ctx.now().toISOString();
  const from = q.from ?? new Date(Date.parse(to) - DAY_MS).toISOString();
  if (Date.parse(from) >= Date.parse(to)) throw consoleError('invalid_range');
  return { ...toFilter(accountId, q), from, to };
}

export function registerLogRoutes(app: FastifyInstance, ctx: ConsoleContext): void {
  app.get('/requests', async (request, reply) => {
    const account = await requireAccount(ctx, request, reply);
    const q = parseInput(requestsQuery, request.query);
    const filter = toFilter(account.id, q);
    if (q.status !== undefined) filter.status = q.status;
    if (q.outcome) filter.outcome = q.outcome;
    if (q.connection_id) filter.connection_id = q.connection_id;
    if (q.q?.trim()) filter.search = q.q;
    if (q.property) {
      const colon = q.property.indexOf(':');
      filter.property = { name: q.property.slice(0, colon), value: q.property.slice(colon + 1) };
    }
    return ctx.logStore.listRequests(filter, { limit: q.limit, cursor: q.cursor ?? null });
  });

  app.get('/requests/:id', async (request, reply) => {
    const account = await requireAccount(ctx, request, reply);
    const { id } = parseInput(idParam, request.params);
    const row = await ctx.logStore.getRequest(account.id, id);
    if (!row) throw consoleError('request_not_found');
    return { request: row };
  });

  app.get('/usage/series', async (request, reply) => {
    const account = await requireAccount(ctx, request, reply);
    const q = parseInput(seriesQuery, request.query);
    const filter = usageFilter(ctx, account.id, q);
    if ((Date.parse(filter.to) - Date.parse(filter.from)) / BUCKET_MS[q.bucket] > MAX_BUCKETS) {
      throw consoleError('range_too_large', `Too many ${q.bucket} buckets; pick a coarser bucket.`);
    }
    return { points: await ctx.logStore.usageSeries(filter, q.bucket) };
  });

  app.get('/usage/breakdown', async (request, reply) => {
    const account = await requireAccount(ctx, request, reply);
    const q = parseInput(breakdownQuery, request.query);
    return { rows: await ctx.logStore.usageBreakdown(usageFilter(ctx, account.id, q), q.by) };
  });
}
