/**
 * The request log's live tail as server-sent events: each new row of the organization the caller sees (as
 * the list shows it: all of them, or a member's own), as soon as it is written on any instance
 * (log/tail.ts). Filters narrow it as they narrow the list. A browser's EventSource sends no headers, so the
 * organization is a query parameter here.
 */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { providerIds } from '../providers/index.js';
import type { RequestSummary } from '../store/types.js';
import { liveSession } from './auth.js';
import { readSessionToken } from './session-cookie.js';
import type { ConsoleContext } from './context.js';
import { consoleError } from './errors.js';
import { scopeFilter } from './log-routes.js';
import { requireMember } from './org-context.js';
import { parseInput, queryInt } from './parse.js';

/**
 * A comment this often keeps proxies and load balancers from closing a quiet stream (many idle out after
 * 60 s), and finds a console that went away.
 */
const TAIL_PING_MS = 15_000;
/**
 * A stream outlives the request that opened it: its session and role are read again at most this often (on a
 * row or a ping), so a logout, an expired session or a removal ends it, and a demotion narrows it, without a
 * database read per row.
 */
const SESSION_RECHECK_MS = 2_000;

const text = z.string().min(1).max(256);
const tailQuery = z
  .object({
    org: z
      .string()
      .regex(/^[0-9A-Za-z_-]{1,64}$/)
      .optional(),
    key_id: text.optional(),
    provider: z
      .string()
      .refine((p) => providerIds().includes(p), 'Not a provider this keyrelay serves.')
      .optional(),
    model: text.optional(),
    status: queryInt(0, 999).optional(),
    outcome: z.enum(['ok', 'upstream_error', 'client_aborted', 'timeout', 'refused']).optional(),
    end_user: text.optional(),
    session: text.optional(),
  })
  .strict();

type TailFilter = Omit<z.output<typeof tailQuery>, 'org'>;

function matches(row: RequestSummary, f: TailFilter): boolean {
  for (const k of Object.keys(f) as (keyof TailFilter)[]) {
    if (f[k] !== undefined && row[k] !== f[k]) return false;
  }
  return true;
}

export function registerTailRoute(app: FastifyInstance, ctx: ConsoleContext): void {
  app.get('/requests/tail', async (request, reply) => {
    const { org, ...filter } = parseInput(tailQuery, request.query);
    const caller = await requireMember(ctx, request, reply, org);
    let role = caller.role;
    let scope = await scopeFilter(ctx, caller);
    const visible = (row: RequestSummary) =>
      (scope.account_id === undefined || row.account_id === scope.account_id) &&
      !(row.key_id !== null && scope.exclude_key_ids?.includes(row.key_id));
    const tail = ctx.tail;
    if (!tail) throw consoleError('not_found');
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      'x-content-type-options': 'nosniff',
      // nginx buffers responses by default; a tail must not wait in a buffer.
      'x-accel-buffering': 'no',
    });
    res.write('retry: 2000\n\n');
    const sessionToken = readSessionToken(request);
    let checkedAt = Date.now();
    let checking: Promise<boolean> | null = null;
    const stillAllowed = async (): Promise<boolean> => {
      const session = await liveSession(ctx, sessionToken);
      if (session?.account_id !== caller.accountId) return false;
      const now = await ctx.configStore.getRole(caller.orgId, caller.accountId);
      if (!now) return false;
      if (now !== role) scope = await scopeFilter(ctx, { ...caller, role: (role = now) });
      return true;
    };
    /** Whether the stream may go on; ends it once its session or membership is gone. */
    const signedIn = (): Promise<boolean> => {
      if (res.writableEnded) return Promise.resolve(false);
      if (Date.now() - checkedAt < SESSION_RECHECK_MS) return Promise.resolve(true);
      checking ??= stillAllowed()
        .catch(() => true) // the store failing says nothing about the session: try again later
        .then((ok) => {
          checkedAt = Date.now();
          checking = null;
          if (!ok) res.end();
          return ok;
        });
      return checking;
    };
    const unsubscribe = tail.subscribe(caller.orgId, (row) => {
      if (!matches(row, filter)) return;
      void signedIn().then((ok) => {
        if (ok && visible(row)) res.write(`event: request\ndata: ${JSON.stringify(row)}\n\n`);
      });
    });
    const ping = setInterval(() => {
      void signedIn().then((ok) => ok && res.write(': ping\n\n'));
    }, TAIL_PING_MS);
    res.on('close', () => {
      clearInterval(ping);
      unsubscribe();
    });
  });
}
