/**
 * A real OpenID Connect identity provider for tests: `oidc-provider` on 127.0.0.1, configured as a company's
 * IdP would be for a first-party app: confidential clients, PKCE required, its own sign-in form that checks a
 * password, no consent screen (the grant is made at sign-in), email and email_verified in the ID token.
 * `swapIdToken` replaces the ID token of the next token response, as a compromised or confused path would.
 */
import { generateKeyPairSync } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import Provider, { type Configuration } from 'oidc-provider';
import { request } from 'undici';

export interface IdpUser {
  password: string;
  email: string;
  email_verified?: boolean;
}

export interface IdpClient {
  client_id: string;
  client_secret: string;
  redirect_uris: string[];
}

export interface Idp {
  issuer: string;
  users: Map<string, IdpUser>;
  /** The next token response carries this ID token instead of its own. */
  swapIdToken(idToken: string): void;
  close(): Promise<void>;
}

const escape = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function form(uid: string, error?: string): string {
  return `<!doctype html><html><head><title>Example IdP sign-in</title></head><body>
<h1>Example IdP</h1>${error ? `<p role="alert">${escape(error)}</p>` : ''}
<form method="post" action="/interaction/${escape(uid)}/login">
<label>Username <input name="login" autocomplete="username" required></label>
<label>Password <input type="password" name="password" autocomplete="current-password" required></label>
<button type="submit">Sign in to Example IdP</button>
</form></body></html>`;
}

async function readForm(req: IncomingMessage): Promise<URLSearchParams> {
  let body = '';
  for await (const chunk of req) body += String(chunk);
  return new URLSearchParams(body);
}

export async function startIdp(opts: {
  clients: IdpClient[];
  users?: Record<string, IdpUser>;
}): Promise<Idp> {
  const users = new Map(Object.entries(opts.users ?? {}));
  const server: Server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const configuration: Configuration = {
    clients: opts.clients.map((c) => ({
      ...c,
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
    })),
    jwks: { keys: [{ ...privateKey.export({ format: 'jwk' }), kid: 'test-key', use: 'sig', alg: 'RS256' }] },
    cookies: { keys: ['idp cookie signing key for tests'] },
    claims: { openid: ['sub'], email: ['email', 'email_verified'] },
    // Most company IdPs put the scope's claims in the ID token of a code flow too.
    conformIdTokenClaims: false,
    pkce: { required: () => true },
    ttl: {
      AuthorizationCode: 60,
      Interaction: 600,
      Grant: 3600,
      Session: 3600,
      AccessToken: 600,
      IdToken: 600,
    },
    features: { devInteractions: { enabled: false } },
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    findAccount: (_ctx, sub) => {
      const user = users.get(sub);
      if (!user) return undefined;
      return {
        accountId: sub,
        claims: () => ({ sub, email: user.email, email_verified: user.email_verified ?? true }),
      };
    },
  };
  const provider = new Provider(issuer, configuration);
  let swap: string | null = null;
  provider.use(async (ctx, next) => {
    await next();
    if (ctx.path === '/token' && swap && ctx.body && typeof ctx.body === 'object') {
      ctx.body = { ...(ctx.body as Record<string, unknown>), id_token: swap };
      swap = null;
    }
  });
  const callback = provider.callback();

  async function interaction(req: IncomingMessage, res: ServerResponse, uid: string, submit: boolean) {
    const details = await provider.interactionDetails(req, res);
    if (!submit) {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(form(details.uid));
      return;
    }
    const body = await readForm(req);
    const login = body.get('login') ?? '';
    const user = users.get(login);
    if (!user || user.password !== body.get('password')) {
      res
        .writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
        .end(form(uid, 'Wrong username or password.'));
      return;
    }
    const grant = new provider.Grant({ accountId: login, clientId: String(details.params.client_id) });
    grant.addOIDCScope(String(details.params.scope));
    const grantId = await grant.save();
    await provider.interactionFinished(
      req,
      res,
      { login: { accountId: login }, consent: { grantId } },
      { mergeWithLastSubmission: false },
    );
  }

  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const m = /^\/interaction\/([A-Za-z0-9_-]+)(\/login)?$/.exec(req.url ?? '');
    if (!m) {
      void callback(req, res);
      return;
    }
    interaction(req, res, m[1]!, m[2] !== undefined && req.method === 'POST').catch((err: unknown) => {
      res.writeHead(400, { 'content-type': 'text/plain' }).end(String(err));
    });
  });

  return {
    issuer,
    users,
    swapIdToken: (t) => {
      swap = t;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Cookies by name, for one host: enough for a flow against one IdP. */
class Jar {
  private readonly cookies = new Map<string, string>();
  take(headers: Record<string, string | string[] | undefined>): void {
    const raw = headers['set-cookie'];
    for (const c of Array.isArray(raw) ? raw : raw ? [raw] : []) {
      const [pair] = c.split(';');
      const eq = pair!.indexOf('=');
      this.cookies.set(pair!.slice(0, eq).trim(), pair!.slice(eq + 1).trim());
    }
  }
  header(): string {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }
}

/**
 * Signs in at the IdP as a browser would (authorization URL, its form, the redirects) and returns where the
 * IdP sends the browser back: the client's redirect URI with `code`, `state` and `iss`.
 */
export async function signInAtIdp(authorizationUrl: string, login: string, password: string): Promise<URL> {
  const jar = new Jar();
  let url = new URL(authorizationUrl);
  const origin = url.origin;
  let method: 'GET' | 'POST' = 'GET';
  let body: string | undefined;
  for (let hop = 0; hop < 10; hop++) {
    const res = await request(url, {
      method,
      body,
      headers: {
        cookie: jar.header(),
        ...(body ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
      },
    });
    jar.take(res.headers);
    const text = await res.body.text();
    const location = res.headers.location;
    if (res.statusCode >= 300 && res.statusCode < 400 && typeof location === 'string') {
      const next = new URL(location, url);
      if (next.origin !== origin) return next;
      url = next;
      method = 'GET';
      body = undefined;
      continue;
    }
    const action = /<form method="post" action="([^"]+)"/.exec(text);
    if (res.statusCode !== 200 || !action || body) {
      throw new Error(`IdP sign-in stopped at ${url.pathname}: ${res.statusCode} ${text.slice(0, 300)}`);
    }
    url = new URL(action[1]!, url);
    method = 'POST';
    body = new URLSearchParams({ login, password }).toString();
  }
  throw new Error('IdP sign-in: too many redirects');
}
