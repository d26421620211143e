/** Session handling for route handlers: who is calling, and starting a session on a reply. */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { createSession, deleteSession, getSession } from '../accounts/sessions.js';
import { passwordSignInRefused } from '../orgs/sso.js';
import { consoleError } from './errors.js';
import type { Account, ApiTokenScope, SessionRecord, SessionVia } from '../store/types.js';
import { verifyApiToken } from '../keys/api-tokens.js';
import type { ConsoleContext } from './context.js';
import { clearSessionCookie, readSessionToken, setSessionCookie } from './session-cookie.js';

export function accountView(a: Account): Account {
  return { id: a.id, email: a.email, created_at: a.created_at };
}

export function secureCookies(ctx: ConsoleContext, request: FastifyRequest): boolean {
  return ctx.config.secureCookies || request.protocol === 'https';
}

/** A bearer value that is one of keyrelay's API tokens (`krt_…`), else undefined. */
function bearerApiToken(request: FastifyRequest): string | undefined {
  const auth = request.headers.authorization;
  if (typeof auth !== 'string' || !/^Bearer\s+krt_/i.test(auth)) return undefined;
  return auth.replace(/^Bearer\s+/i, '').trim();
}

/**
 * The caller's account, or 401 not_authenticated (and a stale cookie is cleared). `scope`: the route may be
 * read with an API token of that scope (GET only); a token anywhere else is refused, never ignored.
 */
export async function requireAccount(
  ctx: ConsoleContext,
  request: FastifyRequest,
  reply: FastifyReply,
  scope?: ApiTokenScope,
): Promise<Account> {
  const bearer = bearerApiToken(request);
  if (bearer !== undefined) {
    if (request.method !== 'GET' && request.method !== 'HEAD') throw consoleError('token_read_only');
    const record = await verifyApiToken(ctx.configStore, bearer);
    if (!record) throw consoleError('token_invalid');
    if (!scope || !record.scopes.includes(scope)) throw consoleError('token_scope');
    const owner = await ctx.configStore.getAccountById(record.account_id);
    if (!owner) throw consoleError('token_invalid');
    return accountView(owner);
  }
  const token = readSessionToken(request);
  const session = await liveSession(ctx, token);
  const account = session ? await ctx.configStore.getAccountById(session.account_id) : null;
  if (!account) {
    if (token !== undefined) clearSessionCookie(reply, secureCookies(ctx, request));
    throw consoleError('not_authenticated');
  }
  return accountView(account);
}

/**
 * The session a cookie token names, if it is live and its way of signing in is still allowed. A password
 * session outlives no switch to SSO-only sign-in: it ends at its next use, as if the member had signed in
 * then and been refused (an owner's password stays allowed, and so does an owner's session).
 */
export async function liveSession(
  ctx: ConsoleContext,
  token: string | undefined,
): Promise<SessionRecord | null> {
  const session = await getSession(ctx.sessions, token);
  if (!session || session.via === 'sso') return session;
  if (!(await passwordSignInRefused(ctx.configStore, session.account_id))) return session;
  await deleteSession(ctx.sessions, token);
  return null;
}

/** A brand-new session (never the one the request came with: no fixation) set as the cookie. */
export async function startSession(
  ctx: ConsoleContext,
  request: FastifyRequest,
  reply: FastifyReply,
  accountId: string,
  via: SessionVia,
): Promise<void> {
  await deleteSession(ctx.sessions, readSessionToken(request));
  const { token } = await createSession(ctx.sessions, accountId, via);
  setSessionCookie(reply, token, ctx.sessions.maxMs, secureCookies(ctx, request));
}
