/** Read-only API tokens: created and revoked by a signed-in person (never with a token), shown once. */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { createApiToken } from '../keys/api-tokens.js';
import { API_TOKEN_SCOPES, type ApiTokenRecord } from '../store/types.js';
import { requireAccount } from './auth.js';
import type { ConsoleContext } from './context.js';
import { consoleError } from './errors.js';
import { idParam, parseInput } from './parse.js';

const createBody = z
  .object({
    name: z.string().trim().min(1).max(100),
    scopes: z.array(z.enum(API_TOKEN_SCOPES)).min(1).max(API_TOKEN_SCOPES.length),
  })
  .strict();

const view = ({ account_id: _owner, ...t }: ApiTokenRecord) => t;

export function registerTokenRoutes(app: FastifyInstance, ctx: ConsoleContext): void {
  app.get('/api-tokens', async (request, reply) => {
    const account = await requireAccount(ctx, request, reply);
    return { tokens: (await ctx.configStore.listApiTokens(account.id)).map(view) };
  });

  app.post('/api-tokens', async (request, reply) => {
    const account = await requireAccount(ctx, request, reply);
    const body = parseInput(createBody, request.body);
    const { token, record } = await createApiToken(ctx.configStore, {
      accountId: account.id,
      name: body.name,
      scopes: body.scopes,
      now: ctx.now(),
    });
    return reply.code(201).send({ token: view(record), secret: token });
  });

  app.post('/api-tokens/:id/revoke', async (request, reply) => {
    const account = await requireAccount(ctx, request, reply);
    const { id } = parseInput(idParam, request.params);
    if (!(await ctx.configStore.revokeApiToken(account.id, id, ctx.now().toISOString())))
      throw consoleError('token_not_found');
    const token = (await ctx.configStore.listApiTokens(account.id)).find((t) => t.id === id)!;
    return { token: view(token) };
  });
}
