/**
 * The console's JSON API under /api/console (contract: docs/console-api.md). Routes validate input, call a
 * domain action and let errors fall through to one handler. Everything here is scoped to this prefix:
 * its own JSON-only body parser, security headers, `cache-control: no-store`, the CSRF gate, 404s.
 */
import type { FastifyInstance } from 'fastify';
import { dummyHash } from '../accounts/password.js';
import { consoleError } from './errors.js';
import { registerAuthRoutes } from './auth-routes.js';
import { registerBatchRoutes } from './batch-routes.js';
import { registerCredentialRoutes } from './credential-routes.js';
import { registerReconcileRoute } from './reconcile-route.js';
import { registerTailRoute } from './tail-route.js';
import { registerTokenRoutes } from './token-routes.js';
import { OPENAPI_DOCUMENT } from './openapi.js';
import { buildContext, type ConsoleDeps } from './context.js';
import { handleConsoleError } from './error-handler.js';
import { registerInfoRoute } from './info-route.js';
import { registerKeyRoutes } from './key-routes.js';
import { registerLogRoutes } from './log-routes.js';
import { registerSessionRoutes } from './session-routes.js';
import { registerOrgRoutes } from './org-routes.js';
import { registerAlertRoutes } from './alert-routes.js';
import { registerAuditRoutes } from './audit.js';
import { registerSettingsRoutes } from './settings-routes.js';
import { registerSignupSettingsRoutes } from './signup-settings-routes.js';
import { registerSsoRoutes } from './sso-routes.js';
import { noStore, refuseCrossSite, securityHeaders } from './security.js';

export type { ConsoleDeps } from './context.js';
export { securityHeaders, CONTENT_SECURITY_POLICY } from './security.js';
export { SESSION_COOKIE } from './session-cookie.js';

export const CONSOLE_API_PREFIX = '/api/console';
/** Console bodies are small JSON; the proxy's much larger limit must not apply here. */
const BODY_LIMIT = 64 * 1024;

export async function registerConsoleApi(app: FastifyInstance, deps: ConsoleDeps): Promise<void> {
  // Computed now, so the first unknown-email login is not slower than a wrong password.
  await dummyHash();
  const ctx = buildContext(deps);
  await app.register(
    (scope, _opts, done) => {
      // Whatever parsers the root has (the proxy takes raw bodies), console routes accept JSON only.
      scope.removeAllContentTypeParsers();
      scope.addContentTypeParser(
        'application/json',
        { parseAs: 'string', bodyLimit: BODY_LIMIT },
        scope.getDefaultJsonParser('error', 'error'),
      );
      scope.addHook('onRoute', (route) => {
        route.bodyLimit ??= BODY_LIMIT;
      });
      scope.addHook('onRequest', securityHeaders);
      scope.addHook('onRequest', noStore);
      scope.addHook('onRequest', refuseCrossSite(deps.config));
      scope.setErrorHandler(handleConsoleError);
      const notFound = () => Promise.reject(consoleError('not_found'));
      scope.setNotFoundHandler(notFound);

      registerInfoRoute(scope, ctx);
      registerAuthRoutes(scope, ctx);
      registerKeyRoutes(scope, ctx);
      registerLogRoutes(scope, ctx);
      registerSessionRoutes(scope, ctx);
      registerBatchRoutes(scope, ctx);
      registerOrgRoutes(scope, ctx);
      registerAuditRoutes(scope, ctx);
      registerAlertRoutes(scope, ctx);
      registerSettingsRoutes(scope, ctx);
      registerSignupSettingsRoutes(scope, ctx);
      registerSsoRoutes(scope, ctx);
      registerCredentialRoutes(scope, ctx);
      registerTailRoute(scope, ctx);
      registerTokenRoutes(scope, ctx);
      registerReconcileRoute(scope, ctx, ctx.metrics);
      scope.get('/openapi.json', () => Promise.resolve(OPENAPI_DOCUMENT));
      // Beats a root-level SPA fallback (`/*`) so unknown API paths answer JSON 404, not index.html.
      scope.all('/*', notFound);
      done();
    },
    { prefix: CONSOLE_API_PREFIX },
  );
}
