/**
 * Server-side console sessions. The cookie holds a random 32-byte token; the store only ever sees its
 * SHA-256, so a leaked database does not yield usable sessions. A session ends at logout, at a password
 * change (all sessions of the account), after `idleMs` without use, and `maxMs` after login whatever happens.
 * https://cheatsheetseries.owasp.org/cheatsheets/Session_Management_Cheat_Sheet.html
 */
import { createHash, randomBytes } from 'node:crypto';
import type { ConfigStore, SessionRecord, SessionVia } from '../store/types.js';

/** A console left alone for a day signs out; one used daily stays in until SESSION_MAX_MS. */
export const SESSION_IDLE_MS = 24 * 3_600_000;
/** Two weeks after sign-in a session ends whatever happens: a stolen cookie does not live for ever. */
export const SESSION_MAX_MS = 14 * 86_400_000;

export interface SessionDeps {
  store: ConfigStore;
  idleMs: number;
  maxMs: number;
  now?: () => Date;
}

/** base64url of 32 bytes. Anything else is refused before a lookup. */
const TOKEN_PATTERN = /^[A-Za-z0-9_-]{43}$/;
/** last_seen_at is written at most this often per session, so a busy console is not a write per request. */
const TOUCH_EVERY_MS = 60_000;

export function hashSessionToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

function touchInterval(idleMs: number): number {
  // Short idle limits (tests, strict deployments) need a finer touch, or idle expiry would drift by a minute.
  return Math.min(TOUCH_EVERY_MS, Math.floor(idleMs / 10));
}

/** Starts a fresh session (always a new token: no session fixation). Returns the token for the cookie. */
export async function createSession(
  deps: SessionDeps,
  accountId: string,
  via: SessionVia = 'password',
): Promise<{ token: string; session: SessionRecord }> {
  const now = deps.now?.() ?? new Date();
  const token = randomBytes(32).toString('base64url');
  const session: SessionRecord = {
    id_hash: hashSessionToken(token),
    account_id: accountId,
    created_at: now.toISOString(),
    last_seen_at: now.toISOString(),
    expires_at: new Date(now.getTime() + deps.maxMs).toISOString(),
    via,
  };
  await deps.store.createSession(session);
  return { token, session };
}

/** The live session for a cookie token, or null (unknown, malformed, idle too long or past its max age). */
export async function getSession(
  deps: SessionDeps,
  token: string | undefined,
): Promise<SessionRecord | null> {
  if (!token || !TOKEN_PATTERN.test(token)) return null;
  const idHash = hashSessionToken(token);
  const session = await deps.store.getSession(idHash);
  if (!session) return null;
  const now = deps.now?.() ?? new Date();
  const t = now.getTime();
  if (t >= Date.parse(session.expires_at) || t - Date.parse(session.last_seen_at) >= deps.idleMs) {
    await deps.store.deleteSession(idHash);
    return null;
  }
  return touchSession(deps, session, now);
}

/** Records use of a session, coalesced: a write only when last_seen_at is older than the touch interval. */
export async function touchSession(
  deps: SessionDeps,
  session: SessionRecord,
  now: Date = deps.now?.() ?? new Date(),
): Promise<SessionRecord> {
  if (now.getTime() - Date.parse(session.last_seen_at) < touchInterval(deps.idleMs)) return session;
  const at = now.toISOString();
  await deps.store.touchSession(session.id_hash, at);
  return { ...session, last_seen_at: at };
}

export async function deleteSession(deps: SessionDeps, token: string | undefined): Promise<void> {
  if (!token || !TOKEN_PATTERN.test(token)) return;
  await deps.store.deleteSession(hashSessionToken(token));
}

export async function deleteSessionsForAccount(deps: SessionDeps, accountId: string): Promise<void> {
  await deps.store.deleteSessionsForAccount(accountId);
}
