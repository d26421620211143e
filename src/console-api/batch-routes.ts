/** The calling account's batches: status, request counts and results cost, newest first. */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { requireAccount } from './auth.js';
import type { ConsoleContext } from './context.js';
import { parseInput, queryInt } from './parse.js';

const batchesQuery = z.object({ limit: queryInt(1, 200).default(100) });

export function registerBatchRoutes(app: FastifyInstance, ctx: ConsoleContext): void {
  app.get('/batches', async (request, reply) => {
    const account = await requireAccount(ctx, request, reply);
    const q = parseInput(batchesQuery, request.query);
    return { batches: await ctx.logStore.listBatches(account.id, q.limit) };
  });
}
