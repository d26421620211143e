/**
 * What Claude Code says about who is calling, by itself, on every request
 * (https://code.claude.com/docs/en/llm-gateway-protocol): an `X-Claude-Code-Session-Id` header (a UUID per
 * session, from v2.1.86), and `metadata.user_id`, which carries the installation, the signed-in account and the
 * session. Its shape changed in v2.1.78: a JSON string `{"device_id","account_uuid","session_id"}`, before it a
 * string `user_<hash>_account_<uuid>_session_<uuid>` (the account part empty when not signed in).
 */

interface ClaudeCodeUser {
  /** The account's uuid when signed in, else the installation's id. */
  user: string | null;
  session: string | null;
}

const LEGACY = /^user_([0-9a-f]+)_account_([0-9a-f-]*)_session_([0-9a-f-]+)$/i;
/** A value longer than this is not Claude Code's (three ids); it is read as an ordinary end-user id. */
const MAX_USER_ID_CHARS = 512;

const nonEmpty = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null);

/** Claude Code's `metadata.user_id`, or null when the value is not in one of its shapes. */
export function readClaudeCodeUserId(value: string): ClaudeCodeUser | null {
  if (value.length > MAX_USER_ID_CHARS) return null;
  const legacy = LEGACY.exec(value);
  if (legacy) return { user: nonEmpty(legacy[2]) ?? legacy[1]!, session: legacy[3]! };
  if (!value.startsWith('{')) return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return null;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return null;
  const o = parsed as Record<string, unknown>;
  if (!('session_id' in o) && !('device_id' in o)) return null;
  return { user: nonEmpty(o.account_uuid) ?? nonEmpty(o.device_id), session: nonEmpty(o.session_id) };
}
