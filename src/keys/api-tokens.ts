/**
 * Read-only API tokens for scripts and BI tools (docs/console-api.md, "API tokens"): `krt_` and 43 base64url
 * characters (32 random bytes), stored as SHA-256 with a hint, shown once. A token reads its account's usage,
 * requests or export, as its scopes say; it never writes.
 */
import { createHash, randomBytes } from 'node:crypto';
import { newId } from '../ids.js';
import type { ApiTokenRecord, ApiTokenScope, ConfigStore } from '../store/types.js';

const PREFIX = 'krt_';
export const API_TOKEN_PATTERN = /^krt_[A-Za-z0-9_-]{43}$/;

const hashToken = (token: string) => createHash('sha256').update(token).digest('hex');

export async function createApiToken(
  store: Pick<ConfigStore, 'createApiToken'>,
  t: { accountId: string; name: string; scopes: ApiTokenScope[]; now: Date },
): Promise<{ token: string; record: ApiTokenRecord }> {
  const token = PREFIX + randomBytes(32).toString('base64url');
  const record: ApiTokenRecord = {
    id: newId(t.now.getTime()),
    account_id: t.accountId,
    name: t.name,
    hint: `${token.slice(0, 8)}…${token.slice(-4)}`,
    scopes: [...new Set(t.scopes)],
    created_at: t.now.toISOString(),
    revoked_at: null,
  };
  await store.createApiToken({ ...record, hash: hashToken(token) });
  return { token, record };
}

/** The active token a bearer value names, or null (malformed, unknown or revoked: no difference shown). */
export async function verifyApiToken(
  store: Pick<ConfigStore, 'getApiTokenByHash'>,
  token: string,
): Promise<ApiTokenRecord | null> {
  if (!API_TOKEN_PATTERN.test(token)) return null;
  const record = await store.getApiTokenByHash(hashToken(token));
  return record && record.revoked_at === null ? record : null;
}
