/** A KeyRecord as the key cache hands it to the proxy: active, no limits unless `over` sets them. */
import { randomUUID } from 'node:crypto';
import { NO_LIMITS } from '../../src/limits/settings.js';
import type { KeyRecord } from '../../src/store/types.js';

export const keyRecord = (over: Partial<KeyRecord> = {}): KeyRecord => ({
  id: randomUUID(),
  name: 'k',
  account_id: 'a',
  org_id: 'a',
  service: false,
  hint: 'kr_…',
  created_at: new Date().toISOString(),
  last_used_at: null,
  expires_at: null,
  revoked_at: null,
  ...NO_LIMITS,
  ...over,
});
