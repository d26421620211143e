/** The calling account's settings: how long its request log keeps stored bodies (applied by log/retention.ts). */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AccountSettings } from '../store/types.js';
import { requireAccount } from './auth.js';
import type { ConsoleContext } from './context.js';
import { parseInput } from './parse.js';

/** Ten years: longer is "as long as the rows" in any deployment. */
export const MAX_BODY_RETENTION_DAYS = 3650;

const settingsBody = z
  .object({
    // 0 and null both mean "as long as the rows", so the console's empty field and a typed 0 agree.
    body_retention_days: z.number().int().min(0).max(MAX_BODY_RETENTION_DAYS).nullable(),
  })
  .strict();

export function registerSettingsRoutes(app: FastifyInstance, ctx: ConsoleContext): void {
  app.get('/settings', async (request, reply) => {
    const account = await requireAccount(ctx, request, reply);
    return { settings: await ctx.configStore.getAccountSettings(account.id) };
  });

  app.put('/settings', async (request, reply) => {
    const account = await requireAccount(ctx, request, reply);
    const body = parseInput(settingsBody, request.body);
    const settings: AccountSettings = { body_retention_days: body.body_retention_days || null };
    await ctx.configStore.setAccountSettings(account.id, settings);
    return { settings };
  });
}
