/**
 * The `kr_session` cookie: HttpOnly (no script can read it), SameSite=Lax (not sent on cross-site
 * sub-requests or POSTs), Path=/, Secure when the console is served over HTTPS.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';

export const SESSION_COOKIE = 'kr_session';

/** The first kr_session cookie in the header, if any. */
export function readSessionToken(request: FastifyRequest): string | undefined {
  const header = request.headers.cookie;
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === SESSION_COOKIE) return part.slice(eq + 1).trim();
  }
  return undefined;
}

function serialize(value: string, maxAgeSeconds: number, secure: boolean): string {
  const parts = [
    `${SESSION_COOKIE}=${value}`,
    'Path=/',
    `Max-Age=${maxAgeSeconds}`,
    'HttpOnly',
    'SameSite=Lax',
  ];
  if (secure) parts.push('Secure');
  return parts.join('; ');
}

/** token is base64url, so it needs no escaping. */
export function setSessionCookie(
  reply: FastifyReply,
  token: string,
  maxAgeMs: number,
  secure: boolean,
): void {
  reply.header('set-cookie', serialize(token, Math.floor(maxAgeMs / 1000), secure));
}

export function clearSessionCookie(reply: FastifyReply, secure: boolean): void {
  reply.header('set-cookie', serialize('', 0, secure));
}
