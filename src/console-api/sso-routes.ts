/**
 * Single sign-on (docs/teams.md): an organization's OpenID Connect connection, set by its owners, and the
 * sign-in itself. `POST /sso/start` is JSON like every console change (the CSRF gate applies) and answers
 * the identity provider's URL; the provider sends the browser back to `GET /sso/callback`, a top-level
 * navigation, which answers with a redirect into the console, signed in or with `?sso_error=` saying why not.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { normalizeEmail } from '../accounts/create-account.js';
import { effectiveSignupMode } from '../accounts/signup-policy.js';
import { domainError } from '../errors.js';
import { requireRole } from '../orgs/roles.js';
import {
  admitSsoUser,
  checkSsoInput,
  emailDomain,
  finishSsoFlow,
  SSO_FLOW_TTL_MS,
  SsoRefused,
  ssoView,
  startSsoFlow,
} from '../orgs/sso.js';
import type { SsoConnection } from '../store/types.js';
import { audit } from './audit.js';
import { secureCookies, startSession } from './auth.js';
import type { ConsoleContext } from './context.js';
import { consoleError } from './errors.js';
import { requireMember } from './org-context.js';
import { parseInput } from './parse.js';

const FLOW_COOKIE = 'kr_sso';
/** The flow cookie is `<flow handle>.<throttle attempt id>`: neither holds a `.`. */
const ATTEMPT_SEPARATOR = '.';
const CALLBACK_PATH = '/api/console/sso/callback';

const orgParam = z.object({ org: z.string().min(1).max(100) });
const ssoBody = z.object({
  issuer: z.string().min(1).max(2048),
  client_id: z.string().min(1).max(255),
  client_secret: z.string().min(1).max(1024).optional(),
  domains: z.array(z.string().max(253)).max(50),
  default_role: z.enum(['admin', 'member', 'viewer']),
  sso_only: z.boolean().default(false),
});
const startBody = z.object({ email: z.string().min(3).max(320) });

/** What an audit entry says of a connection: whether a secret is set, never the secret. */
function auditFacts(c: SsoConnection | null): Record<string, unknown> | null {
  if (!c) return null;
  const { updated_at: _at, ...facts } = ssoView(c);
  return facts;
}

function readFlowCookie(request: FastifyRequest): string | undefined {
  for (const part of (request.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === FLOW_COOKIE) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** HttpOnly, and Lax so the identity provider's redirect back (a top-level GET) carries it. */
function setFlowCookie(reply: FastifyReply, value: string, maxAgeSeconds: number, secure: boolean): void {
  const parts = [
    `${FLOW_COOKIE}=${value}`,
    'Path=/api/console/sso',
    `Max-Age=${maxAgeSeconds}`,
    'HttpOnly',
    'SameSite=Lax',
  ];
  if (secure) parts.push('Secure');
  reply.header('set-cookie', parts.join('; '));
}

export function registerSsoRoutes(app: FastifyInstance, ctx: ConsoleContext): void {
  const redirectUri = () => `${ctx.config.publicUrl}${CALLBACK_PATH}`;

  async function ownerOf(request: FastifyRequest, reply: FastifyReply) {
    const { org } = parseInput(orgParam, request.params);
    const caller = await requireMember(ctx, request, reply, org);
    requireRole(caller.role, 'own');
    return caller;
  }

  app.get('/orgs/:org/sso', async (request, reply) => {
    const caller = await ownerOf(request, reply);
    const c = await ctx.configStore.getSsoConnection(caller.orgId);
    return { sso: c ? ssoView(c) : null, redirect_uri: redirectUri() };
  });

  app.put('/orgs/:org/sso', async (request, reply) => {
    const caller = await ownerOf(request, reply);
    const org = await ctx.configStore.getOrg(caller.orgId);
    // A personal organization has one member by definition: nobody to sign in through it.
    if (org?.personal_of) throw domainError('invalid_sso', 'A personal organization has no single sign-on.');
    const body = parseInput(ssoBody, request.body);
    const before = await ctx.configStore.getSsoConnection(caller.orgId);
    const checked = checkSsoInput(body, before);
    const after = await ctx.configStore.putSsoConnection({ org_id: caller.orgId, ...checked });
    await audit(ctx, request, caller.account, {
      orgId: caller.orgId,
      action: 'settings.sso',
      before: auditFacts(before),
      after: { ...auditFacts(after), client_secret_changed: body.client_secret !== undefined },
    });
    return { sso: ssoView(after), redirect_uri: redirectUri() };
  });

  app.delete('/orgs/:org/sso', async (request, reply) => {
    const caller = await ownerOf(request, reply);
    const before = await ctx.configStore.getSsoConnection(caller.orgId);
    if (!before) return reply.code(204).send();
    await ctx.configStore.deleteSsoConnection(caller.orgId);
    await audit(ctx, request, caller.account, {
      orgId: caller.orgId,
      action: 'settings.sso',
      before: auditFacts(before),
      after: null,
    });
    return reply.code(204).send();
  });

  app.post('/sso/start', async (request, reply) => {
    const { email } = parseInput(startBody, request.body);
    // Each start fetches the provider's metadata and stores a flow: counted in the sign-in routes' window for
    // the IP (not per address: a start guesses nothing), and taken back when the sign-in completes, as a
    // login's is, so many people behind one address can still sign in.
    const attempt = await ctx.throttle.attempt({ ip: request.ip });
    if (!attempt.allowed) throw consoleError('too_many_attempts', undefined, attempt.retryAfterSeconds);
    const c = await ctx.configStore.findSsoConnectionByDomain(emailDomain(email));
    if (!c) throw consoleError('sso_not_configured');
    const hint = normalizeEmail(email);
    const { cookie, url } = await startSsoFlow(ctx.configStore, c, redirectUri(), ctx.now(), hint);
    setFlowCookie(
      reply,
      `${cookie}${ATTEMPT_SEPARATOR}${attempt.attemptId}`,
      SSO_FLOW_TTL_MS / 1000,
      secureCookies(ctx, request),
    );
    return { url, email: hint };
  });

  app.get('/sso/callback', async (request, reply) => {
    const [cookie, attemptId] = (readFlowCookie(request) ?? '').split(ATTEMPT_SEPARATOR);
    setFlowCookie(reply, '', 0, secureCookies(ctx, request));
    const url = new URL(request.url, 'http://callback.invalid');
    try {
      const { connection, email } = await finishSsoFlow(
        ctx.configStore,
        cookie,
        url,
        redirectUri(),
        ctx.now(),
      );
      const orgId = connection.org_id;
      const mode = await effectiveSignupMode(ctx.config, ctx.configStore);
      const { account, joined } = await admitSsoUser(ctx.keys, connection, email, {
        signupClosed: mode === 'closed',
      });
      if (joined) {
        await audit(ctx, request, account, {
          orgId,
          action: 'member.join',
          target: account.id,
          after: { role: joined, via: 'sso' },
        });
      }
      for (const org of await ctx.configStore.listOrgsOf(account.id)) {
        await audit(ctx, request, account, {
          orgId: org.id,
          action: 'sign_in',
          target: account.id,
          after: { via: 'sso', sso_org: orgId },
        });
      }
      if (attemptId) await ctx.throttle.recordSuccess({ ip: request.ip }, attemptId);
      await startSession(ctx, request, reply, account.id, 'sso');
      return reply.redirect('/', 303);
    } catch (err) {
      if (!(err instanceof SsoRefused)) throw err;
      request.log.info({ reason: err.reason }, 'sso sign-in refused');
      if (err.orgId) {
        await audit(ctx, request, null, {
          orgId: err.orgId,
          action: 'sso.sign_in_failed',
          after: { reason: err.reason, email: err.email },
        });
      }
      return reply.redirect(`/login?sso_error=${err.reason}`, 303);
    }
  });
}
