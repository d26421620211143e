/**
 * Sessions in the caller's organization (a member's own rows, everyone's for the other roles): the list of
 * sessions over a range, and one session's calls in order. A session is the rows sharing a `session` value
 * (proxy-session, Helicone-Session-Id, or the id a coding client sends itself: proxy/attribution.ts).
 */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { consoleError } from './errors.js';
import type { ConsoleContext } from './context.js';
import { commonFilters, scopeFilter, usageFilter } from './log-routes.js';
import { requireMember } from './org-context.js';
import { parseInput, queryInt } from './parse.js';

const DAY_MS = 86_400_000;
/**
 * The longest range a session list sums: every row of the range is read to group it, and a year is more
 * than retention keeps by default (30 days).
 */
const MAX_SESSION_RANGE_DAYS = 366;
/** Calls of one session a page holds: an agent run of a few hundred calls reads in one. */
const MAX_CALLS_PAGE = 1000;

const { session: _session, ...listFilters } = commonFilters;
/** Strict: a filter the list does not know would otherwise be dropped, and list more than was asked. */
const sessionsQuery = z
  .object({
    ...listFilters,
    limit: queryInt(1, 100).default(50),
    cursor: z.string().min(1).max(200).optional(),
  })
  .strict();
const sessionQuery = z
  .object({
    session: z.string().min(1).max(256, 'A session is at most 256 characters.'),
    limit: queryInt(1, MAX_CALLS_PAGE).default(500),
    cursor: z.string().min(1).max(200).optional(),
  })
  .strict();

export function registerSessionRoutes(app: FastifyInstance, ctx: ConsoleContext): void {
  app.get('/sessions', async (request, reply) => {
    const caller = await requireMember(ctx, request, reply, undefined, 'requests');
    const q = parseInput(sessionsQuery, request.query);
    const filter = await usageFilter(ctx, caller, q);
    if (Date.parse(filter.to) - Date.parse(filter.from) > MAX_SESSION_RANGE_DAYS * DAY_MS) {
      throw consoleError(
        'range_too_large',
        `A session list covers at most ${MAX_SESSION_RANGE_DAYS} days; pick a shorter range.`,
      );
    }
    return ctx.logStore.listSessions(filter, { limit: q.limit, cursor: q.cursor ?? null });
  });

  // By query rather than path: a session is any text up to 256 characters, slashes included.
  app.get('/sessions/detail', async (request, reply) => {
    const scope = await scopeFilter(ctx, await requireMember(ctx, request, reply, undefined, 'requests'));
    const q = parseInput(sessionQuery, request.query);
    const rowScope = {
      org_id: scope.org_id!,
      ...(scope.account_id !== undefined && { account_id: scope.account_id }),
      ...(scope.exclude_key_ids !== undefined && { exclude_key_ids: scope.exclude_key_ids }),
    };
    const [summary, calls] = await Promise.all([
      ctx.logStore.listSessions({ ...scope, session: q.session }, { limit: 1 }),
      ctx.logStore.sessionCalls(rowScope, q.session, { limit: q.limit, cursor: q.cursor ?? null }),
    ]);
    const session = summary.items[0];
    if (!session) throw consoleError('session_not_found');
    return { session, calls: calls.items, next_cursor: calls.next_cursor };
  });
}
