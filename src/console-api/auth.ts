/** Session handling for route handlers: who is calling, and starting a session on a reply. */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { createSession, deleteSession, getSession } from '../accounts/sessions.js';
import { consoleError } from './errors.js';
import type { Account } from '../store/types.js';
import type { ConsoleContext } from './context.js';
import { clearSessionCookie, readSessionToken, setSessionCookie } from './session-cookie.js';

export function accountView(a: Account): Account {
  return { id: a.id, email: a.email, created_at: a.created_at };
}

export function secureCookies(ctx: ConsoleContext, request: FastifyRequest): boolean {
  return ctx.config.secureCookies || request.protocol === 'https';
}

/** The caller's account, or 401 not_authenticated (and a stale cookie is cleared). */
export async function requireAccount(
  ctx: ConsoleContext,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<Account> {
  const token = readSessionToken(request);
  const session = await getSession(ctx.sessions, token);
  const account = session ? await ctx.configStore.getAccountById(session.account_id) : null;
  if (!account) {
    if (token !== undefined) clearSessionCookie(reply, secureCookies(ctx, request));
    throw consoleError('not_authenticated');
  }
  return accountView(account);
}

/** A brand-new session (never the one the request came with: no fixation) set as the cookie. */
export async function startSession(
  ctx: ConsoleContext,
  request: FastifyRequest,
  reply: FastifyReply,
  accountId: string,
): Promise<void> {
  await deleteSession(ctx.sessions, readSessionToken(request));
  const { token } = await createSession(ctx.sessions, accountId);
  setSessionCookie(reply, token, ctx.config.sessionMaxMs, secureCookies(ctx, request));
}
