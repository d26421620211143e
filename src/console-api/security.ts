/**
 * Browser-facing defences for the console: security headers (also exported for the static console) and
 * the CSRF gate on state-changing requests. The session cookie is SameSite=Lax already; the gate adds
 * defence in depth for browsers and setups where that is not enough (same-site sibling hosts, old browsers).
 */
import type { FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import type { Config } from '../config.js';
import { consoleError } from './errors.js';

export const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "object-src 'none'",
  "form-action 'self'",
].join('; ');

const HEADERS: Record<string, string> = {
  'content-security-policy': CONTENT_SECURITY_POLICY,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
};

/**
 * Hook for every non-proxy route (console API and static console). Works as `onRequest` (set before the
 * handler, so error replies carry them too) and as `onSend` (a promise resolving to undefined keeps the
 * payload), so `app.addHook('onRequest' | 'onSend', securityHeaders)` both do the right thing.
 */
export function securityHeaders(_request: FastifyRequest, reply: FastifyReply): Promise<void> {
  reply.headers(HEADERS);
  return Promise.resolve();
}

/** API answers can contain a full key: never let a browser or proxy cache keep them. */
export function noStore(_request: FastifyRequest, reply: FastifyReply): Promise<void> {
  reply.header('cache-control', 'no-store');
  return Promise.resolve();
}

const UNSAFE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
const JSON_TYPE = /^application\/json\s*(;|$)/i;

function originOf(url: string): string | null {
  try {
    return new URL(url).origin;
  } catch {
    return null;
  }
}

/**
 * State changes must be JSON (an HTML form cannot send that cross-site without a CORS preflight, which we
 * never grant) and must not come from another site: `Sec-Fetch-Site: cross-site`, or an `Origin` other than
 * this server's own origin or KEYRELAY_PUBLIC_URL's. No Origin at all is allowed: browsers send it on every
 * cross-origin POST, so its absence means a same-origin browser request or a non-browser client.
 */
export function refuseCrossSite(config: Pick<Config, 'publicUrl'>): onRequestHookHandler {
  return (request, _reply, done) => {
    if (!UNSAFE_METHODS.has(request.method)) return done();
    if (request.headers['sec-fetch-site'] === 'cross-site') {
      return done(consoleError('cross_site'));
    }
    const origin = request.headers.origin;
    if (origin !== undefined) {
      const own = originOf(`${request.protocol}://${request.host}`);
      const given = originOf(origin);
      // Read per request: on KEYRELAY_PORT=0 the public URL is known only once the server listens.
      if (given === null || (given !== own && given !== originOf(config.publicUrl))) {
        return done(consoleError('cross_site'));
      }
    }
    if (!JSON_TYPE.test(request.headers['content-type'] ?? '')) {
      return done(consoleError('unsupported_media_type'));
    }
    done();
  };
}
