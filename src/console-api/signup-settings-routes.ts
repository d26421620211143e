/**
 * Install-wide settings the owner changes in the console: the sign-up policy (accounts/signup-policy.ts).
 * The install's owner is its first account; anyone signed in may read what applies.
 */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import {
  consoleSignupMode,
  effectiveSignupMode,
  isInstallOwner,
  setConsoleSignupMode,
} from '../accounts/signup-policy.js';
import { domainError } from '../errors.js';
import { requireAccount } from './auth.js';
import { audit } from './audit.js';
import type { ConsoleContext } from './context.js';
import { parseInput } from './parse.js';

const signupBody = z.object({ mode: z.enum(['open', 'invite', 'closed']) });

export function registerSignupSettingsRoutes(app: FastifyInstance, ctx: ConsoleContext): void {
  async function view(accountId: string) {
    return {
      configured: ctx.config.signup,
      chosen: await consoleSignupMode(ctx.configStore),
      effective: await effectiveSignupMode(ctx.config, ctx.configStore),
      can_change: await isInstallOwner(ctx.configStore, accountId),
    };
  }

  app.get('/settings/signup', async (request, reply) => {
    const account = await requireAccount(ctx, request, reply);
    return view(account.id);
  });

  app.post('/settings/signup', async (request, reply) => {
    const account = await requireAccount(ctx, request, reply);
    if (!(await isInstallOwner(ctx.configStore, account.id))) throw domainError('forbidden');
    const body = parseInput(signupBody, request.body);
    const before = await view(account.id);
    await setConsoleSignupMode(ctx.configStore, body.mode);
    const after = await view(account.id);
    // In the owner's personal organization's log: the setting is the install's, the owner's to answer for.
    await audit(ctx, request, account, {
      orgId: account.id,
      action: 'settings.signup',
      before: { chosen: before.chosen, effective: before.effective },
      after: { chosen: after.chosen, effective: after.effective },
    });
    return after;
  });
}
