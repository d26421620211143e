/**
 * Public facts the console needs before login: sign-up mode, the password rule the server enforces,
 * whether this is a fresh install (no account yet: the console opens on sign-up), and the base URLs.
 */
import type { FastifyInstance } from 'fastify';
import { PASSWORD_MAX_LENGTH, PASSWORD_MIN_LENGTH } from '../accounts/password.js';
import { effectiveSignupMode } from '../accounts/signup-policy.js';
import type { ConsoleContext } from './context.js';

export function registerInfoRoute(app: FastifyInstance, ctx: ConsoleContext): void {
  const password = { min_length: PASSWORD_MIN_LENGTH, max_length: PASSWORD_MAX_LENGTH };
  // Accounts are never deleted: once one exists, stop asking.
  let hasAccounts = false;
  app.get('/info', async () => {
    hasAccounts ||= await ctx.configStore.hasAccounts();
    // Read per request: on KEYRELAY_PORT=0 the public URL is known only once the server listens.
    const publicUrl = ctx.config.publicUrl.replace(/\/+$/, '');
    return {
      signup: await effectiveSignupMode(ctx.config, ctx.configStore),
      password,
      public_url: publicUrl,
      providers: {
        openai: { base_url: `${publicUrl}/api/proxy/openai/v1` },
        anthropic: { base_url: `${publicUrl}/api/proxy/anthropic` },
      },
      // Named upstreams (KEYRELAY_UPSTREAMS): their route; a client adds the provider's own base path.
      upstreams: ctx.config.namedUpstreams.map((u) => ({
        name: u.name,
        shape: u.shape,
        base_url: `${publicUrl}/api/proxy/${u.name}`,
      })),
      fresh_install: !hasAccounts,
    };
  });
}
