/* eslint-disable @typescript-eslint/require-await -- SQLite drivers are synchronous; `async` turns their throws
   into rejections, as the interface promises. */
/** AlertStore on SQLite: `alert_rules` and `alert_deliveries` (config-schema.ts, migrations 15, 16 and 20). */
import type {
  AlertDelivery,
  AlertFormat,
  AlertKind,
  AlertParams,
  AlertRule,
  AlertScope,
  AlertStore,
  AlertDeliveryState,
  AlertDeliveryUpdate,
} from '../alert-types.js';
import type { StatementCache } from './db.js';

type DbRow = Record<string, unknown>;

const RULE_COLUMNS =
  'id, org_id, name, scope, scope_id, kind, params, url, format, secret, enabled, created_at, created_by';
const DELIVERY_COLUMNS =
  'id, rule_id, org_id, dedupe_key, payload, state, attempts, response_status, error, created_at, updated_at';

function decodeRule(r: DbRow): AlertRule {
  return {
    id: r.id as string,
    org_id: r.org_id as string,
    name: r.name as string,
    scope: r.scope as AlertScope,
    scope_id: (r.scope_id as string | null) ?? null,
    kind: r.kind as AlertKind,
    params: JSON.parse(r.params as string) as AlertParams,
    url: r.url as string,
    format: r.format as AlertFormat,
    secret: r.secret as string,
    enabled: r.enabled === 1,
    created_at: r.created_at as string,
    created_by: r.created_by as string,
  };
}

function decodeDelivery(r: DbRow): AlertDelivery {
  return {
    id: r.id as string,
    rule_id: r.rule_id as string,
    org_id: r.org_id as string,
    dedupe_key: r.dedupe_key as string,
    payload: r.payload as string,
    state: r.state as AlertDeliveryState,
    attempts: r.attempts as number,
    response_status: (r.response_status as number | null) ?? null,
    error: (r.error as string | null) ?? null,
    created_at: r.created_at as string,
    updated_at: r.updated_at as string,
  };
}

export function sqliteAlertStore(stmt: StatementCache): AlertStore {
  const rule = (orgId: string, id: string) => {
    const r = stmt<[string, string], DbRow>(
      `SELECT ${RULE_COLUMNS} FROM alert_rules WHERE org_id = ? AND id = ?`,
    ).get(orgId, id);
    return r ? decodeRule(r) : null;
  };
  return {
    async createAlertRule(r) {
      stmt(`INSERT INTO alert_rules (${RULE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`).run(
        r.id,
        r.org_id,
        r.name,
        r.scope,
        r.scope_id,
        r.kind,
        JSON.stringify(r.params),
        r.url,
        r.format,
        r.secret,
        r.enabled ? 1 : 0,
        r.created_at,
        r.created_by,
      );
    },
    async listAlertRules(orgId) {
      return stmt<[string], DbRow>(
        `SELECT ${RULE_COLUMNS} FROM alert_rules WHERE org_id = ? ORDER BY created_at, id`,
      )
        .all(orgId)
        .map(decodeRule);
    },
    async listEnabledAlertRules() {
      return stmt<[], DbRow>(`SELECT ${RULE_COLUMNS} FROM alert_rules WHERE enabled = 1 ORDER BY id`)
        .all()
        .map(decodeRule);
    },
    async setAlertRuleEnabled(orgId, id, enabled) {
      stmt('UPDATE alert_rules SET enabled = ? WHERE org_id = ? AND id = ?').run(enabled ? 1 : 0, orgId, id);
      return rule(orgId, id);
    },
    async deleteAlertRule(orgId, id) {
      return stmt('DELETE FROM alert_rules WHERE org_id = ? AND id = ?').run(orgId, id).changes > 0;
    },
    async claimAlertDelivery(d) {
      const r = stmt(
        `INSERT INTO alert_deliveries (${DELIVERY_COLUMNS}, lease_until)
         VALUES (?, ?, ?, ?, ?, 'pending', 0, NULL, NULL, ?, ?, ?)
         ON CONFLICT (rule_id, dedupe_key) DO NOTHING`,
      ).run(d.id, d.rule_id, d.org_id, d.dedupe_key, d.payload, d.created_at, d.created_at, d.lease_until);
      return r.changes > 0;
    },
    async updateAlertDelivery(id, u: AlertDeliveryUpdate) {
      stmt(
        `UPDATE alert_deliveries
         SET state = ?, attempts = ?, response_status = ?, error = ?, updated_at = ?, lease_until = ?
         WHERE id = ?`,
      ).run(u.state, u.attempts, u.response_status, u.error, u.updated_at, u.lease_until, id);
    },
    async takeOverAlertDeliveries(now, leaseUntil, limit) {
      // One statement: SQLite runs it whole, so no other writer takes the same rows.
      return stmt<[string, string, number, string], DbRow>(
        `UPDATE alert_deliveries SET lease_until = ?
         WHERE id IN (
           SELECT id FROM alert_deliveries WHERE state = 'pending' AND lease_until < ?
           ORDER BY lease_until LIMIT ?
         ) AND state = 'pending' AND lease_until < ?
         RETURNING ${DELIVERY_COLUMNS}`,
      )
        .all(leaseUntil, now, limit, now)
        .map(decodeDelivery);
    },
    async listAlertDeliveries(orgId, limit) {
      return stmt<[string, number], DbRow>(
        `SELECT ${DELIVERY_COLUMNS} FROM alert_deliveries WHERE org_id = ? ORDER BY id DESC LIMIT ?`,
      )
        .all(orgId, limit)
        .map(decodeDelivery);
    },
  };
}
