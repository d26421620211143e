/**
 * Holds, and a request held to several sets of limits at once: an end user's caps, the key's own limits, and
 * the member's across their keys (end-users.ts, members.ts), each a key of its own. They are admitted
 * narrowest first; the first to refuse answers, and what the others took is given back.
 */
import { randomBytes } from 'node:crypto';
import { ProxyError } from '../errors.js';
import type { KeyRecord, LogStore } from '../store/types.js';
import { splitEndUserKeyId } from './end-users.js';
import { splitMemberKeyId, type MemberSpendSince } from './members.js';
import type { Admission, Hold } from './types.js';

/** Hold ids: unique per instance by a random prefix, cheaper than a UUID per request. */
export const HOLD_PREFIX = `${randomBytes(6).toString('base64url')}.`;
let holdSeq = 0;

/** A hold of nothing: what carries another level's hold, or counts its cost, when no limit holds anything. */
export const bareHold = (keyId: string, window: number): Hold => ({
  id: `${HOLD_PREFIX}${++holdSeq}`,
  keyId,
  tokens: 0,
  window,
  tpm: false,
  nanos: 0,
  spend: null,
  slot: false,
  shared: false,
  lease: null,
  leased: 0,
  settled: false,
  user: null,
  member: null,
});

export interface LevelOps {
  /** One level's own admission (KeyLimiter.admitKey). */
  admit(level: KeyRecord): Admission | Promise<Admission>;
  /** Gives back what an admitted level took, for a request a later level refused. */
  release(level: KeyRecord, hold: Hold): void;
  /** The minute window a bare hold is in. */
  window: number;
}

/**
 * Admits `levels` in order; once all are admitted, `join` makes their holds (one per level: a bare one where
 * a level holds nothing, so settling it still counts the cost against that level's budget) into the
 * request's.
 */
export function admitLevels(
  levels: readonly KeyRecord[],
  ops: LevelOps,
  join: (holds: Hold[]) => Hold,
  holds: Hold[] = [],
): Admission | Promise<Admission> {
  if (holds.length === levels.length) return join(holds);
  const level = levels[holds.length]!;
  const next = (a: Admission): Admission | Promise<Admission> => {
    if (a instanceof ProxyError) {
      holds.forEach((h, i) => ops.release(levels[i]!, h));
      return a;
    }
    holds.push(a ?? bareHold(level.id, ops.window));
    return admitLevels(levels, ops, join, holds);
  };
  const admitted = ops.admit(level);
  return admitted instanceof Promise ? admitted.then(next) : next(admitted);
}

/** The spend of any level's id in a period: an end user's rows of the key, or a member's keys' rows. */
export function levelSpendSince(
  spendSince: LogStore['spendSince'],
  memberSpendSince: MemberSpendSince = () => Promise.resolve(0),
): (id: string, since: string) => Promise<number> {
  return (id, since) => {
    const member = splitMemberKeyId(id);
    if (member) return memberSpendSince(member.orgId, member.accountId, since);
    const user = splitEndUserKeyId(id);
    return user ? spendSince(user.keyId, since, user.endUser) : spendSince(id, since);
  };
}
