/** signup, login, logout, me, password. */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { normalizeEmail } from '../accounts/create-account.js';
import { dummyHash, hashPassword, validatePassword, verifyPassword } from '../accounts/password.js';
import { deleteSession, deleteSessionsForAccount } from '../accounts/sessions.js';
import { issueFirstKey, signUp, takeSignupNotices } from '../accounts/sign-up.js';
import type { ThrottleSubject } from '../accounts/throttle.js';
import { consoleError } from './errors.js';
import { usableInvite } from '../orgs/actions.js';
import { passwordSignInRefused } from '../orgs/sso.js';
import { effectiveSignupMode } from '../accounts/signup-policy.js';
import { accountView, requireAccount, secureCookies, startSession } from './auth.js';
import { auditSignIn } from './audit.js';
import type { ConsoleContext } from './context.js';
import { createdKeyView } from './key-routes.js';
import { parseInput } from './parse.js';
import { clearSessionCookie, readSessionToken } from './session-cookie.js';

const credentials = z.object({ email: z.string().max(320), password: z.string().max(1024) });
/** Sign-up may carry an invitation: with KEYRELAY_SIGNUP=invite, the way in for someone invited. */
const signupBody = credentials.extend({ invite: z.string().max(200).optional() });
const passwordChange = z.object({
  current_password: z.string().max(1024),
  new_password: z.string().max(1024),
});

/** One answer for unknown email and wrong password: nothing to tell the two apart. */
const invalidCredentials = () => consoleError('invalid_credentials');

async function attemptOrRefuse(ctx: ConsoleContext, subject: ThrottleSubject): Promise<string> {
  const attempt = await ctx.throttle.attempt(subject);
  if (!attempt.allowed) {
    throw consoleError('too_many_attempts', undefined, attempt.retryAfterSeconds);
  }
  return attempt.attemptId;
}

export function registerAuthRoutes(app: FastifyInstance, ctx: ConsoleContext): void {
  app.post('/signup', async (request, reply) => {
    // "invite": the very first account (bootstrap) and whoever holds a usable invitation; others via the CLI.
    const mode = await effectiveSignupMode(ctx.config, ctx.configStore);
    if (mode === 'closed') throw consoleError('signup_closed');
    const body = parseInput(signupBody, request.body);
    const invited = mode === 'invite' && body.invite !== undefined;
    if (invited) await usableInvite(ctx.keys, body.invite!);
    // The same 202, in the same time, whether or not the address has an account: nothing to enumerate.
    // Counted per IP and per address (its own window: a sign-up must not lock the account's logins), never
    // taken back (taking it back only for new accounts would tell); bounds notices sent to an owner too.
    await attemptOrRefuse(ctx, { email: `signup:${normalizeEmail(body.email)}`, ip: request.ip });
    const { created } = await signUp(ctx.keys, body, {
      onlyIfFirst: mode === 'invite' && !invited,
      ip: request.ip,
    });
    if (!created) request.log.info('sign-up for an existing address; its owner is told at next sign-in');
    return reply.code(202).send({ next: 'login' });
  });

  app.post('/login', async (request, reply) => {
    const body = parseInput(credentials, request.body);
    const subject = { email: normalizeEmail(body.email), ip: request.ip };
    const attemptId = await attemptOrRefuse(ctx, subject);
    const account = await ctx.configStore.getAccountByEmail(subject.email);
    // Unknown email: verify against a dummy hash anyway, so the answer takes as long as a wrong password.
    const ok = await verifyPassword(body.password, account?.password_hash ?? (await dummyHash()));
    // Told only to whoever knows the password: an SSO-only organization's members sign in through its IdP.
    const ssoRequired = account && ok ? await passwordSignInRefused(ctx.configStore, account.id) : false;
    if (account) await auditSignIn(ctx, request, account, ok && !ssoRequired);
    if (!account || !ok) throw invalidCredentials();
    await ctx.throttle.recordSuccess(subject, attemptId);
    if (ssoRequired) throw consoleError('sso_required');
    await startSession(ctx, request, reply, account.id, 'password');
    // First sign-in after sign-up: the default key, shown once. Every sign-in: sign-up attempts on this address.
    const key = await issueFirstKey(ctx.keys, account.id);
    const notices = await takeSignupNotices(ctx.keys, account.id);
    return { account: accountView(account), key: key ? createdKeyView(key) : null, notices };
  });

  app.post('/logout', async (request, reply) => {
    await deleteSession(ctx.sessions, readSessionToken(request));
    clearSessionCookie(reply, secureCookies(ctx, request));
    return reply.code(204).send();
  });

  app.get('/me', async (request, reply) => ({ account: await requireAccount(ctx, request, reply) }));

  app.post('/password', async (request, reply) => {
    const account = await requireAccount(ctx, request, reply);
    const body = parseInput(passwordChange, request.body);
    const problem = validatePassword(body.new_password);
    if (problem) throw consoleError('weak_password', problem);
    // Guessing the current password from a stolen session is throttled like a login.
    const subject = { email: account.email, ip: request.ip };
    const attemptId = await attemptOrRefuse(ctx, subject);
    const full = await ctx.configStore.getAccountById(account.id);
    if (!full || !(await verifyPassword(body.current_password, full.password_hash))) {
      throw consoleError('wrong_password');
    }
    await ctx.throttle.recordSuccess(subject, attemptId);
    if (body.new_password === body.current_password) {
      throw consoleError('weak_password', 'The new password is the same as the current one; choose another.');
    }
    await ctx.configStore.setPassword(account.id, await hashPassword(body.new_password));
    await deleteSessionsForAccount(ctx.sessions, account.id);
    await startSession(ctx, request, reply, account.id, 'password');
    return reply.code(204).send();
  });
}
