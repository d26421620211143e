/** An alert rule as a console request or the CLI gives it, checked field by field (docs/alerts.md). */
import { randomBytes } from 'node:crypto';
import { DomainError } from '../errors.js';
import { newId } from '../ids.js';
import {
  ALERT_FORMATS,
  ALERT_KINDS,
  ALERT_SCOPES,
  type AlertFormat,
  type AlertKind,
  type AlertParams,
  type AlertRule,
  type AlertScope,
} from '../store/alert-types.js';

const invalid = (field: string, why: string) =>
  new DomainError('invalid_alert_rule', `Invalid alert rule: ${field} ${why}.`, { field });

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

function oneOf<T extends string>(v: unknown, allowed: readonly T[], field: string): T {
  if (typeof v === 'string' && (allowed as readonly string[]).includes(v)) return v as T;
  throw invalid(field, `must be one of ${allowed.join(', ')}`);
}

function numberIn(v: unknown, field: string, min: number, max: number, integer = false): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max || (integer && !Number.isInteger(v)))
    throw invalid(field, `must be a${integer ? 'n integer' : ' number'} from ${min} to ${max}`);
  return v;
}

/** The kind's parameters, each within its range. */
export function parseAlertParams(kind: AlertKind, p: unknown): AlertParams {
  if (!isRecord(p)) throw invalid('params', 'must be an object');
  switch (kind) {
    case 'budget': {
      if (!Array.isArray(p.thresholds) || p.thresholds.length < 1 || p.thresholds.length > 10)
        throw invalid('params.thresholds', 'must list 1 to 10 percentages');
      const thresholds = [
        ...new Set(p.thresholds.map((t) => numberIn(t, 'params.thresholds', 1, 1000, true))),
      ].sort((a, b) => a - b);
      return {
        budget_usd: numberIn(p.budget_usd, 'params.budget_usd', 0.000001, 1e9),
        period: oneOf(p.period, ['day', 'month'] as const, 'params.period'),
        thresholds,
      };
    }
    case 'error_rate':
      return {
        window_minutes: numberIn(p.window_minutes, 'params.window_minutes', 1, 1440, true),
        threshold_percent: numberIn(p.threshold_percent, 'params.threshold_percent', 0.1, 100),
        min_requests: numberIn(p.min_requests ?? 10, 'params.min_requests', 1, 1_000_000, true),
      };
    case 'spend_spike':
      return {
        factor: numberIn(p.factor, 'params.factor', 1.1, 1000),
        baseline_days: numberIn(p.baseline_days ?? 7, 'params.baseline_days', 1, 28, true),
        min_usd: numberIn(p.min_usd ?? 1, 'params.min_usd', 0, 1e9),
      };
    case 'new_credential':
      return { known_days: numberIn(p.known_days ?? 90, 'params.known_days', 1, 3650, true) };
  }
}

export interface AlertRuleInput {
  name: string;
  scope: AlertScope;
  scope_id: string | null;
  kind: AlertKind;
  params: AlertParams;
  url: string;
  format: AlertFormat;
}

/** The fields of a new rule; the scope's member or key is checked against the organization by the caller. */
export function parseAlertRuleInput(body: unknown): AlertRuleInput {
  if (!isRecord(body)) throw invalid('body', 'must be an object');
  const name = typeof body.name === 'string' ? body.name.trim() : '';
  if (name.length < 1 || name.length > 100) throw invalid('name', 'must be 1–100 characters');
  const scope = oneOf(body.scope ?? 'org', ALERT_SCOPES, 'scope');
  let scopeId: string | null = null;
  if (scope !== 'org') {
    if (typeof body.scope_id !== 'string' || body.scope_id === '' || body.scope_id.length > 64)
      throw invalid('scope_id', `must name the ${scope === 'key' ? 'key' : "member's account"}`);
    scopeId = body.scope_id;
  }
  const kind = oneOf(body.kind, ALERT_KINDS, 'kind');
  if (typeof body.url !== 'string' || body.url.length > 2048) throw invalid('url', 'must be a URL');
  return {
    name,
    scope,
    scope_id: scopeId,
    kind,
    params: parseAlertParams(kind, body.params),
    url: body.url,
    format: oneOf(body.format ?? 'json', ALERT_FORMATS, 'format'),
  };
}

/** A new rule with its signing secret (shown to the organization's admins, who configure receivers). */
export function newAlertRule(orgId: string, actorId: string, input: AlertRuleInput, now: Date): AlertRule {
  return {
    id: newId(),
    org_id: orgId,
    ...input,
    secret: `whsec_${randomBytes(24).toString('base64url')}`,
    enabled: true,
    created_at: now.toISOString(),
    created_by: actorId,
  };
}
