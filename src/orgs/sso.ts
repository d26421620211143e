/**
 * Single sign-on with OpenID Connect (docs/teams.md, "Single sign-on"): an organization's connection to its
 * identity provider, and the authorization code flow with PKCE, state and nonce through `openid-client`,
 * which checks the ID token (signature, issuer, audience, nonce, expiry) and the RFC 9207 `iss` parameter.
 * keyrelay adds what only it can check: the flow belongs to the browser that started it (a cookie whose
 * hash keys the stored flow, taken once), and the person's email is verified and of one of the
 * organization's domains.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type * as Oidc from 'openid-client';
import { normalizeEmail } from '../accounts/create-account.js';
import { hashPassword } from '../accounts/password.js';
import { DOMAIN_ERRORS, DomainError, domainError, isDomainError } from '../errors.js';
import { newId } from '../ids.js';
import type { KeyDeps } from '../keys/actions.js';
import type { Account, ConfigStore, OrgRole, SsoConnection, SsoFlow } from '../store/types.js';

/** Long enough to type a password and answer a second factor at the identity provider. */
export const SSO_FLOW_TTL_MS = 10 * 60_000;
/** A down identity provider answers the console's start within this, not after the OS's TCP timeout. */
const IDP_TIMEOUT_SECONDS = 5;
/** Discovery (issuer metadata, keys) is fetched again after this, so a key rotation at the IdP is picked up. */
const DISCOVERY_TTL_MS = 10 * 60_000;
const DOMAIN = /^(?=.{1,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$/;
const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]']);
const SSO_ROLES = ['admin', 'member', 'viewer'] as const;

export type SsoRole = (typeof SSO_ROLES)[number];

export interface SsoInput {
  issuer: string;
  client_id: string;
  /** Absent: keep the stored one (the console never has it to send back). */
  client_secret?: string;
  domains: string[];
  default_role: SsoRole;
  sso_only: boolean;
}

/** Why a callback was refused: the console's login page names each (`?sso_error=`). */
export type SsoFailure =
  | 'flow' // no flow for this browser, used already, expired, or the state does not match
  | 'idp' // the identity provider refused, or its answer failed a check (issuer, audience, nonce, signature)
  | 'unreachable' // the identity provider did not answer
  | 'email' // no verified email in the ID token
  | 'domain' // the email's domain is not one of the organization's
  | 'account' // an account with this email exists outside the organization
  | 'closed'; // sign-up is closed to new accounts

export class SsoRefused extends Error {
  override name = 'SsoRefused';
  constructor(
    readonly reason: SsoFailure,
    message: string,
    /** The email the identity provider named, once known (for the audit entry). */
    readonly email: string | null = null,
    /** The organization whose sign-in this was, once known (its audit log records the refusal). */
    public orgId: string | null = null,
  ) {
    super(message);
  }
}

/** The issuer as given, if it is an absolute https URL (http only on the loopback: a local test IdP). */
function checkIssuer(value: string): string {
  let url: URL;
  try {
    url = new URL(value.trim());
  } catch {
    throw domainError('invalid_sso', 'The issuer must be an absolute URL.');
  }
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && LOOPBACK.has(url.hostname))) {
    throw domainError('invalid_sso', 'The issuer must be an https URL.');
  }
  if (url.search || url.hash || url.username || url.password) {
    throw domainError('invalid_sso', 'The issuer has no query, fragment or credentials.');
  }
  // Kept as an identity provider writes its issuer: no trailing slash on a bare origin.
  return url.pathname === '/' ? url.origin : url.href;
}

export function checkSsoInput(
  input: SsoInput,
  stored: SsoConnection | null,
): Omit<SsoConnection, 'org_id' | 'updated_at'> {
  const clientId = input.client_id.trim();
  if (!clientId || clientId.length > 255)
    throw domainError('invalid_sso', 'Client id must be 1–255 characters.');
  const secret = input.client_secret ?? stored?.client_secret;
  if (!secret || secret.length > 1024) {
    throw domainError('invalid_sso', 'A client secret (up to 1024 characters) is needed.');
  }
  const domains = [...new Set(input.domains.map((d) => d.trim().toLowerCase()))];
  if (domains.length === 0 || domains.length > 50) {
    throw domainError('invalid_sso', 'Name 1–50 email domains, such as example.com.');
  }
  for (const d of domains) {
    if (!DOMAIN.test(d)) throw domainError('invalid_sso', `"${d}" is not an email domain.`);
  }
  if (!(SSO_ROLES as readonly string[]).includes(input.default_role)) {
    throw domainError('invalid_sso', 'The default role is admin, member or viewer.');
  }
  return {
    issuer: checkIssuer(input.issuer),
    client_id: clientId,
    client_secret: secret,
    domains,
    default_role: input.default_role,
    sso_only: input.sso_only,
  };
}

/** The connection as the API shows it: never the secret. */
export function ssoView(c: SsoConnection) {
  return {
    issuer: c.issuer,
    client_id: c.client_id,
    client_secret_set: c.client_secret !== '',
    domains: c.domains,
    default_role: c.default_role,
    sso_only: c.sso_only,
    updated_at: c.updated_at,
  };
}

export const emailDomain = (email: string): string => normalizeEmail(email).split('@').pop() ?? '';

const sha256 = (v: string) => createHash('sha256').update(v).digest('hex');

/**
 * Loaded at the first single sign-on: most instances never use it, and its modules (openid-client,
 * oauth4webapi, jose) would otherwise sit in every idle instance's memory.
 */
const loadOidc = (): Promise<typeof Oidc> => import('openid-client');

const discovered = new Map<string, { at: number; config: Promise<Oidc.Configuration> }>();

/** The identity provider's metadata for a connection, fetched once per DISCOVERY_TTL_MS. */
function discover(c: SsoConnection, now: number): Promise<Oidc.Configuration> {
  const cacheKey = sha256(JSON.stringify([c.issuer, c.client_id, c.client_secret]));
  const hit = discovered.get(cacheKey);
  if (hit && now - hit.at < DISCOVERY_TTL_MS) return hit.config;
  const url = new URL(c.issuer);
  const config = loadOidc()
    .then((oidc) =>
      oidc.discovery(url, c.client_id, c.client_secret, oidc.ClientSecretBasic(c.client_secret), {
        timeout: IDP_TIMEOUT_SECONDS,
        execute: url.protocol === 'http:' ? [oidc.allowInsecureRequests] : [],
      }),
    )
    .then((cfg) => {
      cfg.timeout = IDP_TIMEOUT_SECONDS;
      return cfg;
    });
  // A failure is not kept: the next sign-in asks again.
  config.catch(() => discovered.delete(cacheKey));
  discovered.set(cacheKey, { at: now, config });
  return config;
}

/**
 * Starts a sign-in: stores the flow (state, nonce, PKCE verifier) under the hash of a fresh random value for
 * the browser's cookie, and returns that value and the identity provider's authorization URL.
 */
export async function startSsoFlow(
  store: ConfigStore,
  c: SsoConnection,
  redirectUri: string,
  now: Date,
  /** The email the person typed: the provider may fill its sign-in form with it. */
  loginHint?: string,
): Promise<{ cookie: string; url: string }> {
  const oidc = await loadOidc();
  let config: Oidc.Configuration;
  try {
    config = await discover(c, now.getTime());
  } catch (err) {
    throw new DomainError('sso_unavailable', DOMAIN_ERRORS.sso_unavailable, undefined, { cause: err });
  }
  const cookie = randomBytes(32).toString('base64url');
  const codeVerifier = oidc.randomPKCECodeVerifier();
  const state = oidc.randomState();
  const nonce = oidc.randomNonce();
  await store.createSsoFlow({
    id_hash: sha256(cookie),
    org_id: c.org_id,
    state,
    nonce,
    code_verifier: codeVerifier,
    expires_at: new Date(now.getTime() + SSO_FLOW_TTL_MS).toISOString(),
  });
  const url = oidc.buildAuthorizationUrl(config, {
    redirect_uri: redirectUri,
    scope: 'openid email',
    response_type: 'code',
    code_challenge: await oidc.calculatePKCECodeChallenge(codeVerifier),
    code_challenge_method: 'S256',
    state,
    nonce,
    ...(loginHint ? { login_hint: loginHint } : {}),
  });
  return { cookie, url: url.href };
}

/**
 * Finishes a sign-in at the callback: takes the browser's flow (once), has openid-client redeem the code
 * and check the ID token, and returns the verified email with the connection. Refusals are SsoRefused.
 */
export async function finishSsoFlow(
  store: ConfigStore,
  cookie: string | undefined,
  callbackUrl: URL,
  redirectUri: string,
  now: Date,
): Promise<{ connection: SsoConnection; email: string; subject: string }> {
  const flow =
    cookie && /^[A-Za-z0-9_-]{43}$/.test(cookie)
      ? await store.takeSsoFlow(sha256(cookie), now.toISOString())
      : null;
  if (!flow) throw new SsoRefused('flow', 'This sign-in was not started here, was used already or expired.');
  try {
    return await redeem(store, flow, callbackUrl, redirectUri, now);
  } catch (err) {
    if (err instanceof SsoRefused) err.orgId ??= flow.org_id;
    throw err;
  }
}

async function redeem(
  store: ConfigStore,
  flow: SsoFlow,
  callbackUrl: URL,
  redirectUri: string,
  now: Date,
): Promise<{ connection: SsoConnection; email: string; subject: string }> {
  const connection = await store.getSsoConnection(flow.org_id);
  if (!connection) throw new SsoRefused('flow', 'Single sign-on is no longer set up for this organization.');
  const oidc = await loadOidc();
  let config: Oidc.Configuration;
  try {
    config = await discover(connection, now.getTime());
  } catch {
    throw new SsoRefused('unreachable', 'The identity provider could not be reached.');
  }
  // Checked here too (openid-client checks it as well) so that a wrong state reads as the flow's fault.
  const state = callbackUrl.searchParams.get('state') ?? '';
  if (state.length !== flow.state.length || !timingSafeEqual(Buffer.from(state), Buffer.from(flow.state))) {
    throw new SsoRefused('flow', 'The state does not match the sign-in this browser started.');
  }
  // The callback URL as the identity provider was told it, with the parameters it sent.
  const current = new URL(redirectUri);
  current.search = callbackUrl.search;
  let claims: Oidc.IDToken | undefined;
  try {
    const tokens = await oidc.authorizationCodeGrant(config, current, {
      pkceCodeVerifier: flow.code_verifier,
      expectedState: flow.state,
      expectedNonce: flow.nonce,
      idTokenExpected: true,
    });
    claims = tokens.claims();
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    throw new SsoRefused(isNetworkError(err) ? 'unreachable' : 'idp', message);
  }
  if (!claims) throw new SsoRefused('idp', 'The identity provider sent no ID token.');
  const email = typeof claims.email === 'string' ? normalizeEmail(claims.email) : '';
  if (!email || claims.email_verified !== true) {
    throw new SsoRefused('email', 'The identity provider named no verified email address.', email || null);
  }
  if (!connection.domains.includes(emailDomain(email))) {
    throw new SsoRefused('domain', `${email} is not of this organization's email domains.`, email);
  }
  return { connection, email, subject: claims.sub };
}

function isNetworkError(err: unknown): boolean {
  const cause = err instanceof Error ? err.cause : undefined;
  return (
    err instanceof TypeError ||
    (err instanceof Error && err.name === 'TimeoutError') ||
    (cause instanceof Error && /ECONNREFUSED|ETIMEDOUT|ECONNRESET|ENOTFOUND/.test(`${String(cause)}`))
  );
}

/**
 * The account a verified SSO sign-in is for. A member signs in; a new email gets an account and joins with
 * the connection's default role (unless sign-up is closed). An account with that email outside the
 * organization is refused: the organization's identity provider vouches for its own people, not for an
 * account someone made elsewhere, so it cannot be used to take one over.
 */
export async function admitSsoUser(
  deps: KeyDeps,
  connection: SsoConnection,
  email: string,
  opts: { signupClosed: boolean },
): Promise<{ account: Account; joined: OrgRole | null }> {
  const existing = await deps.store.getAccountByEmail(email);
  if (existing) {
    if (!(await deps.store.getRole(connection.org_id, existing.id))) {
      throw new SsoRefused(
        'account',
        'An account with this email exists outside the organization; ask an admin for an invitation.',
        email,
        connection.org_id,
      );
    }
    return {
      account: { id: existing.id, email: existing.email, created_at: existing.created_at },
      joined: null,
    };
  }
  if (opts.signupClosed) throw new SsoRefused('closed', 'Sign-up is closed.', email, connection.org_id);
  // A password nobody knows: password sign-in fails for it like any wrong password, in the same time.
  const passwordHash = await hashPassword(randomBytes(32).toString('base64url'));
  let account: Account;
  try {
    account = await deps.store.createAccount({ id: newId(), email, password_hash: passwordHash });
  } catch (err) {
    // Two first sign-ins at once: the other made the account; it is a member once that one finishes.
    if (isDomainError(err) && err.code === 'email_taken') {
      throw new SsoRefused(
        'flow',
        'A sign-in for this person is already under way; try again.',
        email,
        connection.org_id,
      );
    }
    throw err;
  }
  await deps.store.setMember(connection.org_id, account.id, connection.default_role);
  return { account, joined: connection.default_role };
}

/**
 * Whether password sign-in is refused for an account: it is a member, not an owner, of an organization whose
 * connection is SSO-only. Owners keep their password, so a broken identity provider never locks everyone out.
 */
export async function passwordSignInRefused(store: ConfigStore, accountId: string): Promise<boolean> {
  for (const org of await store.listOrgsOf(accountId)) {
    if (org.role === 'owner') continue;
    if ((await store.getSsoConnection(org.id))?.sso_only) return true;
  }
  return false;
}
