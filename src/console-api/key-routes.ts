/** Keys of the calling account: list, create, rename, roll, revoke. Foreign ids answer 404. */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { ApiError } from '../errors.js';
import { createKey, renameKey, revokeKey, rollKey, toKeyView, type CreatedKey } from '../keys/actions.js';
import type { KeyView } from '../store/types.js';
import { requireAccount } from './auth.js';
import type { ConsoleContext } from './context.js';
import { idParam, isoTime, parseInput } from './parse.js';

/** The only shape in which a full key leaves the server: the response that created it. */
export function createdKeyView(k: CreatedKey): KeyView & { key: string } {
  return { ...k.view, key: k.key };
}

const createBody = z.object({ name: z.string().max(200), expires_at: isoTime.nullable().optional() });
const renameBody = z.object({ name: z.string().max(200) });
// Range and integrality are rollKey's to check (400 invalid_grace), so CLI and console answer alike.
const rollBody = z.object({ grace_seconds: z.number() });

export function registerKeyRoutes(app: FastifyInstance, ctx: ConsoleContext): void {
  app.get('/keys', async (request, reply) => {
    const account = await requireAccount(ctx, request, reply);
    const now = ctx.now();
    const keys = (await ctx.configStore.listKeys(account.id))
      .sort((a, b) => b.created_at.localeCompare(a.created_at) || b.id.localeCompare(a.id))
      .map((k) => toKeyView(k, now));
    return { keys };
  });

  app.post('/keys', async (request, reply) => {
    const account = await requireAccount(ctx, request, reply);
    const body = parseInput(createBody, request.body);
    if (body.expires_at && Date.parse(body.expires_at) <= ctx.now().getTime()) {
      throw new ApiError(400, 'invalid_expiry', 'expires_at must be in the future.');
    }
    const created = await createKey(ctx.keys, {
      accountId: account.id,
      name: body.name,
      expiresAt: body.expires_at,
    });
    return reply.code(201).send({ key: createdKeyView(created) });
  });

  app.patch('/keys/:id', async (request, reply) => {
    const account = await requireAccount(ctx, request, reply);
    const { id } = parseInput(idParam, request.params);
    const body = parseInput(renameBody, request.body);
    return { key: await renameKey(ctx.keys, account.id, id, body.name) };
  });

  app.post('/keys/:id/roll', async (request, reply) => {
    const account = await requireAccount(ctx, request, reply);
    const { id } = parseInput(idParam, request.params);
    const body = parseInput(rollBody, request.body);
    const { created, old } = await rollKey(ctx.keys, account.id, id, body.grace_seconds);
    return reply.code(201).send({ key: createdKeyView(created), old });
  });

  app.post('/keys/:id/revoke', async (request, reply) => {
    const account = await requireAccount(ctx, request, reply);
    const { id } = parseInput(idParam, request.params);
    return { key: await revokeKey(ctx.keys, account.id, id) };
  });
}
