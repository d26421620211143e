/** Public facts the console needs before login: sign-up mode and the base URLs for the quickstart. */
import type { FastifyInstance } from 'fastify';
import type { ConsoleContext } from './context.js';

export function registerInfoRoute(app: FastifyInstance, ctx: ConsoleContext): void {
  const publicUrl = ctx.config.publicUrl.replace(/\/+$/, '');
  const info = {
    signup: ctx.config.signup,
    public_url: publicUrl,
    providers: {
      openai: { base_url: `${publicUrl}/api/proxy/openai/v1` },
      anthropic: { base_url: `${publicUrl}/api/proxy/anthropic` },
    },
  };
  app.get('/info', () => info);
}
