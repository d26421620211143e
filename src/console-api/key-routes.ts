/** Keys of the calling account: list, create, rename, set limits, roll, revoke. Foreign ids answer 404. */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { consoleError } from './errors.js';
import {
  checkKeyName,
  createKey,
  renameKey,
  revokeKey,
  rollKey,
  setKeyLimits,
  toKeyView,
  type CreatedKey,
} from '../keys/actions.js';
import type { KeyLimits, KeyView } from '../store/types.js';
import { requireAccount } from './auth.js';
import type { ConsoleContext } from './context.js';
import { idParam, isoTime, parseInput } from './parse.js';

/** The only shape in which a full key leaves the server: the response that created it. */
export function createdKeyView(k: CreatedKey): KeyView & { key: string } {
  return { ...k.view, key: k.key };
}

// Types here; ranges are setKeyLimits' to check (400 invalid_limits), so CLI and console answer alike.
const limitFields = {
  allowed_providers: z
    .array(z.enum(['openai', 'anthropic']))
    .max(10)
    .nullable()
    .optional(),
  allowed_models: z.array(z.string().max(1000)).max(1000).nullable().optional(),
  rate_limit_rpm: z.number().nullable().optional(),
  budget_usd: z.number().nullable().optional(),
  budget_period: z.enum(['day', 'month']).nullable().optional(),
  budget_mode: z.enum(['soft', 'hard']).optional(),
  rate_limit_tpm: z.number().nullable().optional(),
  max_concurrent: z.number().nullable().optional(),
  rate_limit_scope: z.enum(['billable', 'all']).optional(),
};
const createBody = z.object({
  name: z.string().max(200),
  expires_at: isoTime.nullable().optional(),
  ...limitFields,
});
const patchBody = z.object({ name: z.string().max(200).optional(), ...limitFields });

/** The limit fields present in a body (undefined = absent = unchanged). */
function limitsOf(body: Partial<KeyLimits>): Partial<KeyLimits> | null {
  const out: Partial<KeyLimits> = {};
  let any = false;
  for (const k of Object.keys(limitFields) as (keyof KeyLimits)[]) {
    if (body[k] !== undefined) {
      (out as Record<string, unknown>)[k] = body[k];
      any = true;
    }
  }
  return any ? out : null;
}
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
      throw consoleError('invalid_expiry');
    }
    const created = await createKey(ctx.keys, {
      accountId: account.id,
      name: body.name,
      expiresAt: body.expires_at,
      limits: limitsOf(body) ?? undefined,
    });
    return reply.code(201).send({ key: createdKeyView(created) });
  });

  app.patch('/keys/:id', async (request, reply) => {
    const account = await requireAccount(ctx, request, reply);
    const { id } = parseInput(idParam, request.params);
    const body = parseInput(patchBody, request.body);
    const limits = limitsOf(body);
    if (body.name === undefined && !limits) throw consoleError('invalid_request', 'Nothing to change.');
    // The name is checked before anything is written, so a bad one never leaves the limits half-applied.
    if (body.name !== undefined) checkKeyName(body.name);
    let key = limits ? await setKeyLimits(ctx.keys, account.id, id, limits) : null;
    if (body.name !== undefined) key = await renameKey(ctx.keys, account.id, id, body.name);
    return { key };
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
