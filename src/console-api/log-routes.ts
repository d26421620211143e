/**
 * Request log and usage in the caller's organization (a member's own rows, everyone's for the other roles),
 * straight from the LogStore's query methods.
 */
import { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { consoleError } from './errors.js';
import { EXPORT_CONTENT_TYPES, EXPORT_FORMATS, exportText } from '../log/export.js';
import { explainRowCost } from '../metering/index.js';
import { providerIds, type Provider } from '../providers/index.js';
import {
  BREAKDOWN_COLUMNS,
  REQUEST_SORT_KEYS,
  SPLIT_COLUMNS,
  type BreakdownBy,
  type RequestFilter,
  type RequestSort,
} from '../store/types.js';
import type { ConsoleContext } from './context.js';
import { requireMember, visibleScope } from './org-context.js';
import type { Caller } from '../orgs/actions.js';
import { can } from '../orgs/roles.js';
import { idParam, isoTime, parseInput, queryInt } from './parse.js';

const DAY_MS = 86_400_000;
const BUCKET_MS = { minute: 60_000, hour: 3_600_000, day: DAY_MS } as const;
/** A chart never needs more points than this; larger ranges must pick a coarser bucket. */
const MAX_BUCKETS = 10_000;
/**
 * Groups a breakdown answers with, at most: end users and sessions run to tens of thousands, which no table
 * shows; the rest are counted in `total_groups`.
 */
const MAX_BREAKDOWN_ROWS = 500;

const text = z.string().min(1).max(200);
/** The most a search or a model filter holds: more is never a name or a phrase worth looking for. */
const MAX_TYPED_CHARS = 200;
export const commonFilters = {
  key_id: text.optional(),
  // The providers this deployment serves: a name it does not know is a typo, said rather than matching nothing.
  provider: z
    .string()
    .refine((p) => providerIds().includes(p), 'Not a provider this keyrelay serves.')
    .optional(),
  model: z
    .string()
    .min(1)
    .max(MAX_TYPED_CHARS, `The model filter takes up to ${MAX_TYPED_CHARS} characters; shorten it.`)
    .optional(),
  // Exactly as logged (the proxy keeps at most 256 characters of either).
  end_user: z.string().min(1).max(256, 'An end user is at most 256 characters.').optional(),
  session: z.string().min(1).max(256, 'A session is at most 256 characters.').optional(),
  from: isoTime.optional(),
  to: isoTime.optional(),
};

/** The list's filters, also the export's. */
const rowFilters = {
  ...commonFilters,
  status: queryInt(0, 999).optional(),
  outcome: z.enum(['ok', 'upstream_error', 'client_aborted', 'timeout', 'refused']).optional(),
  property: z
    .string()
    .max(400, 'The property filter takes up to 400 characters; shorten it.')
    .regex(/^[^:]/, 'Give the property name first: name or name:value, e.g. team:search.')
    .optional(),
  connection_id: z
    .string()
    .regex(/^[0-9A-Za-z]{1,64}$/)
    .optional(),
  // Words to find in model, path, end user, session and stored bodies.
  q: z
    .string()
    .max(MAX_TYPED_CHARS, `Search looks for up to ${MAX_TYPED_CHARS} characters; shorten it.`)
    .optional(),
};
/** `sort`: a key and a direction, e.g. `cost:desc`; newest first when absent. */
const SORT_PARAM = new RegExp(`^(${REQUEST_SORT_KEYS.join('|')}):(asc|desc)$`);
const requestsQuery = z.object({
  ...rowFilters,
  limit: queryInt(1, 200).default(50),
  cursor: z.string().min(1).max(200).optional(),
  sort: z
    .string()
    .regex(SORT_PARAM, `Sort by ${REQUEST_SORT_KEYS.join(', ')}, then :asc or :desc (e.g. cost:desc).`)
    .transform((v): RequestSort => {
      const [by, dir] = v.split(':') as [RequestSort['by'], RequestSort['dir']];
      return { by, dir };
    })
    .optional(),
});
/** Strict: a filter the export does not know would otherwise be dropped, and export more than was asked. */
const exportQuery = z
  .object({ ...rowFilters, format: z.enum(EXPORT_FORMATS), limit: queryInt(1, 100_000_000).optional() })
  .strict();
const seriesQuery = z.object({ ...commonFilters, bucket: z.enum(['minute', 'hour', 'day']).default('hour') });
/** `property:<name>` groups by one custom property's value. */
const breakdownBy = z
  .union([
    z.enum(BREAKDOWN_COLUMNS),
    z.string().regex(/^property:.{1,64}$/, 'must be a column or property:<name>'),
  ])
  .transform((by): BreakdownBy =>
    by.startsWith('property:') ? { property: by.slice(9) } : (by as BreakdownBy),
  );
const breakdownQuery = z.object({
  ...commonFilters,
  by: breakdownBy.default('model'),
  rank: z.enum(['requests', 'cost', 'tokens']).default('requests'),
  limit: queryInt(1, MAX_BREAKDOWN_ROWS).default(MAX_BREAKDOWN_ROWS),
});

/** Groups a split chart names at most; the rest are summed as one "other" group. */
const MAX_SPLIT_GROUPS = 20;
/** Strict: the split is a chart's, and a filter it does not know would chart more than was asked. */
const splitQuery = seriesQuery
  .extend({
    split_by: z.enum(SPLIT_COLUMNS),
    top: queryInt(1, MAX_SPLIT_GROUPS).default(5),
    rank: z.enum(['requests', 'cost', 'tokens']).default('cost'),
  })
  .strict();

type Common = {
  key_id?: string;
  provider?: Provider;
  model?: string;
  end_user?: string;
  session?: string;
  from?: string;
  to?: string;
};

/**
 * A caller's rows: the organization's, or with only their own (visibleScope) their own keys' rows. A member's
 * rows leave out the service keys they created while an admin: those keys are the organization's.
 */
export async function scopeFilter(ctx: ConsoleContext, caller: Caller): Promise<RequestFilter> {
  const scope = visibleScope(caller);
  if (scope.accountId === undefined) return { org_id: scope.orgId };
  const service = (await ctx.configStore.listOrgKeys(scope.orgId))
    .filter((k) => k.service && k.account_id === scope.accountId)
    .map((k) => k.id);
  return {
    org_id: scope.orgId,
    account_id: scope.accountId,
    ...(service.length > 0 && { exclude_key_ids: service }),
  };
}

/**
 * An account's own rows across its organizations (pages that are the account's, not an organization's): as
 * scopeFilter, the service keys it created leave with its admin role, in each organization where it no longer
 * sees every row (or is no longer a member).
 */
export async function accountFilter(ctx: ConsoleContext, accountId: string): Promise<RequestFilter> {
  const [keys, orgs] = await Promise.all([
    ctx.configStore.listKeys(accountId),
    ctx.configStore.listOrgsOf(accountId),
  ]);
  const seesAll = new Set(orgs.filter((o) => can(o.role, 'read_all')).map((o) => o.id));
  const hidden = keys.filter((k) => k.service && !seesAll.has(k.org_id)).map((k) => k.id);
  return { account_id: accountId, ...(hidden.length > 0 && { exclude_key_ids: hidden }) };
}

function toFilter(scope: RequestFilter, q: Common): RequestFilter {
  const f: RequestFilter = { ...scope };
  if (q.key_id) f.key_id = q.key_id;
  if (q.provider) f.provider = q.provider;
  // "name" in quotes is that model exactly (the usage breakdown's links); otherwise any model containing it.
  const exact = q.model && /^"(.+)"$/.exec(q.model);
  if (exact) f.model = exact[1];
  else if (q.model) f.model_contains = q.model;
  if (q.end_user) f.end_user = q.end_user;
  if (q.session) f.session = q.session;
  if (q.from) f.from = q.from;
  if (q.to) f.to = q.to;
  return f;
}

/** Usage defaults to the last 24 h: `to` = now, `from` = `to` − 24 h. */
export async function usageFilter(
  ctx: ConsoleContext,
  caller: Caller,
  q: Common,
): Promise<RequestFilter & { from: string; to: string }> {
  const to = q.to ?? ctx.now().toISOString();
  const from = q.from ?? new Date(Date.parse(to) - DAY_MS).toISOString();
  if (Date.parse(from) >= Date.parse(to)) throw consoleError('invalid_range');
  return { ...toFilter(await scopeFilter(ctx, caller), q), from, to };
}

type RowFilters = z.output<typeof requestsQuery>;

async function rowFilter(
  ctx: ConsoleContext,
  caller: Caller,
  q: Omit<RowFilters, 'limit' | 'cursor' | 'sort'>,
): Promise<RequestFilter> {
  const filter = toFilter(await scopeFilter(ctx, caller), q);
  if (q.status !== undefined) filter.status = q.status;
  if (q.outcome) filter.outcome = q.outcome;
  if (q.connection_id) filter.connection_id = q.connection_id;
  if (q.q?.trim()) filter.search = q.q;
  if (q.property) {
    // Property names are header names, stored in lower case: compared the way headers are.
    const colon = q.property.indexOf(':');
    filter.property =
      colon < 0
        ? { name: q.property.toLowerCase() }
        : { name: q.property.slice(0, colon).toLowerCase(), value: q.property.slice(colon + 1) };
  }
  return filter;
}

export function registerLogRoutes(app: FastifyInstance, ctx: ConsoleContext): void {
  app.get('/requests', async (request, reply) => {
    const caller = await requireMember(ctx, request, reply, undefined, 'requests');
    const q = parseInput(requestsQuery, request.query);
    return ctx.logStore.listRequests(await rowFilter(ctx, caller, q), {
      limit: q.limit,
      cursor: q.cursor ?? null,
      ...(q.sort && { sort: q.sort }),
    });
  });

  // Streamed a page at a time: a client that goes away stops the reading (Readable.from ends the generator).
  app.get('/requests/export', async (request, reply) => {
    const caller = await requireMember(ctx, request, reply, undefined, 'export');
    const q = parseInput(exportQuery, request.query);
    const filter = await rowFilter(ctx, caller, q);
    const day = ctx.now().toISOString().slice(0, 10);
    return reply
      .header('content-type', EXPORT_CONTENT_TYPES[q.format])
      .header('content-disposition', `attachment; filename="keyrelay-requests-${day}.${q.format}"`)
      .header('cache-control', 'no-store')
      .send(Readable.from(exportText(ctx.logStore, filter, q.format, q.limit)));
  });

  app.get('/requests/:id', async (request, reply) => {
    const scope = await scopeFilter(ctx, await requireMember(ctx, request, reply, undefined, 'requests'));
    const { id } = parseInput(idParam, request.params);
    const row = await ctx.logStore.getRequest({ org_id: scope.org_id!, account_id: scope.account_id }, id);
    if (!row || (row.key_id !== null && scope.exclude_key_ids?.includes(row.key_id)))
      throw consoleError('request_not_found');
    return { request: row, cost_breakdown: explainRowCost(row) };
  });

  app.get('/usage/series', async (request, reply) => {
    const caller = await requireMember(ctx, request, reply, undefined, 'usage');
    const q = parseInput(seriesQuery, request.query);
    const filter = await usageFilter(ctx, caller, q);
    if ((Date.parse(filter.to) - Date.parse(filter.from)) / BUCKET_MS[q.bucket] > MAX_BUCKETS) {
      throw consoleError('range_too_large', `Too many ${q.bucket} buckets; pick a coarser bucket.`);
    }
    return { points: await ctx.logStore.usageSeries(filter, q.bucket) };
  });

  // The top groups by `rank` over the range, then each bucket's sums for each of them and for the rest.
  app.get('/usage/series/split', async (request, reply) => {
    const caller = await requireMember(ctx, request, reply, undefined, 'usage');
    const q = parseInput(splitQuery, request.query);
    const filter = await usageFilter(ctx, caller, q);
    if ((Date.parse(filter.to) - Date.parse(filter.from)) / BUCKET_MS[q.bucket] > MAX_BUCKETS) {
      throw consoleError('range_too_large', `Too many ${q.bucket} buckets; pick a coarser bucket.`);
    }
    const ranked = await ctx.logStore.usageTop(filter, q.split_by, q.rank, q.top);
    const names = ranked.rows.map((r) => r.group);
    const points = await ctx.logStore.usageSeriesSplit(filter, q.bucket, q.split_by, names);
    return { groups: ranked.rows, total_groups: ranked.total_groups, points };
  });

  app.get('/usage/breakdown', async (request, reply) => {
    const caller = await requireMember(ctx, request, reply, undefined, 'usage');
    const q = parseInput(breakdownQuery, request.query);
    return ctx.logStore.usageTop(await usageFilter(ctx, caller, q), q.by, q.rank, q.limit);
  });
}
