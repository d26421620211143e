/** AlertStore on PostgreSQL: `alert_rules` and `alert_deliveries` (config-schema.ts, migrations 15, 16, 20). */
import type pg from 'pg';
import type {
  AlertDelivery,
  AlertDeliveryState,
  AlertFormat,
  AlertKind,
  AlertParams,
  AlertRule,
  AlertScope,
  AlertStore,
} from '../alert-types.js';
import { isoOrNull } from './db.js';

type Row = Record<string, unknown>;

const RULE_COLUMNS =
  'id, org_id, name, scope, scope_id, kind, params, url, format, secret, enabled, created_at, created_by';
const DELIVERY_COLUMNS =
  'id, rule_id, org_id, dedupe_key, payload, state, attempts, response_status, error, created_at, updated_at';

function decodeRule(r: Row): AlertRule {
  return {
    id: r.id as string,
    org_id: r.org_id as string,
    name: r.name as string,
    scope: r.scope as AlertScope,
    scope_id: (r.scope_id as string | null) ?? null,
    kind: r.kind as AlertKind,
    params: r.params as AlertParams,
    url: r.url as string,
    format: r.format as AlertFormat,
    secret: r.secret as string,
    enabled: r.enabled === true,
    created_at: isoOrNull(r.created_at)!,
    created_by: r.created_by as string,
  };
}

function decodeDelivery(r: Row): AlertDelivery {
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
    created_at: isoOrNull(r.created_at)!,
    updated_at: isoOrNull(r.updated_at)!,
  };
}

export function pgAlertStore(pool: pg.Pool): AlertStore {
  const rows = async (sql: string, params: unknown[]) => (await pool.query<Row>(sql, params)).rows;
  return {
    async createAlertRule(r) {
      await pool.query(
        `INSERT INTO alert_rules (${RULE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
        [
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
          r.enabled,
          r.created_at,
          r.created_by,
        ],
      );
    },
    async listAlertRules(orgId) {
      const list = await rows(
        `SELECT ${RULE_COLUMNS} FROM alert_rules WHERE org_id = $1 ORDER BY created_at, id`,
        [orgId],
      );
      return list.map(decodeRule);
    },
    async listEnabledAlertRules() {
      return (await rows(`SELECT ${RULE_COLUMNS} FROM alert_rules WHERE enabled ORDER BY id`, [])).map(
        decodeRule,
      );
    },
    async setAlertRuleEnabled(orgId, id, enabled) {
      const [r] = await rows(
        `UPDATE alert_rules SET enabled = $3 WHERE org_id = $1 AND id = $2 RETURNING ${RULE_COLUMNS}`,
        [orgId, id, enabled],
      );
      return r ? decodeRule(r) : null;
    },
    async deleteAlertRule(orgId, id) {
      const r = await pool.query('DELETE FROM alert_rules WHERE org_id = $1 AND id = $2', [orgId, id]);
      return (r.rowCount ?? 0) > 0;
    },
    async claimAlertDelivery(d) {
      const r = await pool.query(
        `INSERT INTO alert_deliveries (${DELIVERY_COLUMNS}, lease_until)
         VALUES ($1, $2, $3, $4, $5, 'pending', 0, NULL, NULL, $6, $6, $7)
         ON CONFLICT (rule_id, dedupe_key) DO NOTHING`,
        [d.id, d.rule_id, d.org_id, d.dedupe_key, d.payload, d.created_at, d.lease_until],
      );
      return (r.rowCount ?? 0) > 0;
    },
    async updateAlertDelivery(id, u) {
      await pool.query(
        `UPDATE alert_deliveries
         SET state = $2, attempts = $3, response_status = $4, error = $5, updated_at = $6, lease_until = $7
         WHERE id = $1`,
        [id, u.state, u.attempts, u.response_status, u.error, u.updated_at, u.lease_until],
      );
    },
    async takeOverAlertDeliveries(now, leaseUntil, limit) {
      // SKIP LOCKED: instances sweeping at once lock disjoint rows. The pick is a CTE, run once (a subquery
      // under IN may be run again per row, and its LIMIT then bounds each run, not the whole).
      const list = await rows(
        `WITH picked AS (
           SELECT id FROM alert_deliveries WHERE state = 'pending' AND lease_until < $1
           ORDER BY lease_until LIMIT $3 FOR UPDATE SKIP LOCKED
         )
         UPDATE alert_deliveries d SET lease_until = $2 FROM picked
         WHERE d.id = picked.id AND d.state = 'pending' AND d.lease_until < $1
         RETURNING ${DELIVERY_COLUMNS.split(', ')
           .map((c) => `d.${c}`)
           .join(', ')}`,
        [now, leaseUntil, limit],
      );
      return list.map(decodeDelivery);
    },
    async listAlertDeliveries(orgId, limit) {
      const list = await rows(
        `SELECT ${DELIVERY_COLUMNS} FROM alert_deliveries WHERE org_id = $1 ORDER BY id DESC LIMIT $2`,
        [orgId, limit],
      );
      return list.map(decodeDelivery);
    },
  };
}
