/**
 * Provider credentials an account sends through keyrelay, known only by their keyed fingerprint (never any
 * part of the credential): the label its owner gives each, its spend and requests over a range, and the
 * rate-limit headroom the provider reported on its latest response.
 */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { providerIds, providerModule } from '../providers/index.js';
import type { RateLimit } from '../providers/types.js';
import type { RequestFilter } from '../store/types.js';
import type { Provider } from '../types.js';
import { requireAccount } from './auth.js';
import type { ConsoleContext } from './context.js';
import { consoleError } from './errors.js';
import { accountFilter } from './log-routes.js';
import { isoTime, parseInput } from './parse.js';

const DAY_MS = 86_400_000;
/** Credentials listed at most (by spend): an account sends a handful; the rest would be noise. */
const MAX_CREDENTIALS = 50;
/** Newest rows of a credential read for its headroom: refusals and failures carry no rate-limit headers. */
const HEADROOM_ROWS = 5;

const rangeQuery = z.object({ from: isoTime.optional(), to: isoTime.optional() }).strict();
const fingerprintParam = z.object({ fingerprint: z.string().regex(/^[0-9A-Za-z_-]{1,128}$/) });
const labelBody = z.object({ label: z.string().trim().min(1).max(100).nullable() }).strict();

interface Headroom {
  seen_at: string;
  provider: Provider;
  limits: RateLimit[];
}

export function registerCredentialRoutes(app: FastifyInstance, ctx: ConsoleContext): void {
  app.get('/credentials', async (request, reply) => {
    const account = await requireAccount(ctx, request, reply, 'usage');
    const q = parseInput(rangeQuery, request.query);
    const to = q.to ?? ctx.now().toISOString();
    const from = q.from ?? new Date(Date.parse(to) - 30 * DAY_MS).toISOString();
    if (Date.parse(from) >= Date.parse(to)) throw consoleError('invalid_range');
    const range = { ...(await accountFilter(ctx, account.id)), account_id: account.id, from, to };
    const [groups, labels] = await Promise.all([
      ctx.logStore.usageBreakdown(range, 'credential_fingerprint'),
      ctx.configStore.listCredentialLabels(account.id),
    ]);
    const named = new Map(labels.map((l) => [l.fingerprint, l.label]));
    const top = groups
      .filter((g) => g.group !== '')
      .sort((a, b) => b.cost_usd - a.cost_usd || b.requests - a.requests)
      .slice(0, MAX_CREDENTIALS);
    const credentials = await Promise.all(
      top.map(async (g) => ({
        fingerprint: g.group,
        label: named.get(g.group) ?? null,
        requests: g.requests,
        errors: g.errors,
        input_tokens: g.input_tokens,
        output_tokens: g.output_tokens,
        cost_usd: g.cost_usd,
        unknown_cost_requests: g.unknown_cost_requests,
        headroom: await latestHeadroom(ctx, { ...range, credential_fingerprint: g.group }),
      })),
    );
    return { from, to, credentials };
  });

  app.put('/credentials/:fingerprint/label', async (request, reply) => {
    const account = await requireAccount(ctx, request, reply);
    const { fingerprint } = parseInput(fingerprintParam, request.params);
    const { label } = parseInput(labelBody, request.body);
    await ctx.configStore.setCredentialLabel(account.id, fingerprint, label);
    return { fingerprint, label };
  });
}

/** The rate limits on the newest of a credential's recent responses that reported any. */
async function latestHeadroom(
  ctx: ConsoleContext,
  filter: RequestFilter & { account_id: string },
): Promise<Headroom | null> {
  const page = await ctx.logStore.listRequests(filter, { limit: HEADROOM_ROWS });
  for (const summary of page.items) {
    const row = await ctx.logStore.getRequest(filter.account_id, summary.id);
    if (!row) continue;
    // A row may name a named upstream no longer configured: its headers are then not read.
    const limits = providerIds().includes(row.provider)
      ? providerModule(row.provider).rateLimits(row.response_headers)
      : [];
    if (limits.length > 0) return { seen_at: row.created_at, provider: row.provider, limits };
  }
  return null;
}
