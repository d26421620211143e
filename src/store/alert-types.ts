/**
 * Alerts: an organization's rules (what to watch, where to send) and the log of what was sent. Part of the
 * ConfigStore, shared by every instance: a delivery row is claimed once per rule and occasion (its
 * `dedupe_key`), which is what makes a threshold crossed on two instances at once one delivery.
 */

export const ALERT_KINDS = ['budget', 'error_rate', 'spend_spike', 'new_credential'] as const;
export type AlertKind = (typeof ALERT_KINDS)[number];

/** Whose calls a rule watches: the organization's, one member's, or one key's. */
export const ALERT_SCOPES = ['org', 'member', 'key'] as const;
export type AlertScope = (typeof ALERT_SCOPES)[number];

/** `json`: keyrelay's signed JSON; `slack`: a Slack incoming-webhook body (`text`), signed the same way. */
export const ALERT_FORMATS = ['json', 'slack'] as const;
export type AlertFormat = (typeof ALERT_FORMATS)[number];

export interface BudgetParams {
  budget_usd: number;
  period: 'day' | 'month';
  /** Percentages of the budget, each delivered once per period. */
  thresholds: number[];
}

export interface ErrorRateParams {
  window_minutes: number;
  /** Percentage of calls in the window that failed (status >= 400 or not `ok`). */
  threshold_percent: number;
  /** Fewer calls than this in the window never alert (two failures of three is no trend). */
  min_requests: number;
}

export interface SpendSpikeParams {
  /** Today's spend (UTC) against the mean of the `baseline_days` days before it. */
  factor: number;
  baseline_days: number;
  /** Spend below this never alerts, however it compares. */
  min_usd: number;
}

/**
 * A provider credential (by its keyed fingerprint) first used in the rule's scope after the rule was made:
 * one that made calls there in the `known_days` before it is known, and never fires.
 */
export interface NewCredentialParams {
  known_days: number;
}

export type AlertParams = BudgetParams | ErrorRateParams | SpendSpikeParams | NewCredentialParams;

export interface AlertRule {
  id: string;
  org_id: string;
  name: string;
  scope: AlertScope;
  /** The member's account id (`member`) or the key id (`key`); null for `org`. */
  scope_id: string | null;
  kind: AlertKind;
  params: AlertParams;
  url: string;
  format: AlertFormat;
  /** The HMAC-SHA256 key deliveries are signed with (`whsec_…`). */
  secret: string;
  enabled: boolean;
  created_at: string;
  created_by: string;
}

export type AlertDeliveryState = 'pending' | 'delivered' | 'failed';

export interface AlertDelivery {
  id: string;
  rule_id: string;
  org_id: string;
  /** What occasion this is, unique per rule: `budget:<period start>:<percent>`, `error_rate:<window start>`… */
  dedupe_key: string;
  /** The exact body sent (and signed). */
  payload: string;
  state: AlertDeliveryState;
  attempts: number;
  /** The last answer's HTTP status; null when none came (refused, timed out). */
  response_status: number | null;
  /** Why the last attempt failed, for a person; null once delivered. */
  error: string | null;
  created_at: string;
  updated_at: string;
}

export type AlertDeliveryUpdate = Pick<
  AlertDelivery,
  'state' | 'attempts' | 'response_status' | 'error' | 'updated_at'
> & {
  /** While pending: when another instance may take it over (its next attempt is due well before). */
  lease_until: string | null;
};

export interface AlertStore {
  createAlertRule: (r: AlertRule) => Promise<void>;
  listAlertRules: (orgId: string) => Promise<AlertRule[]>;
  /** Every organization's enabled rules: what the evaluator reads each round. */
  listEnabledAlertRules: () => Promise<AlertRule[]>;
  /** Sets `enabled`; the rule, or null if the organization has no such rule. */
  setAlertRuleEnabled: (orgId: string, id: string, enabled: boolean) => Promise<AlertRule | null>;
  /** Deletes the rule and its deliveries; whether it existed in the organization. */
  deleteAlertRule: (orgId: string, id: string) => Promise<boolean>;
  /**
   * Inserts a pending delivery unless the rule already has one with its dedupe_key; true when this call
   * inserted it (the caller then delivers it, holding it until `lease_until`). Atomic across instances
   * sharing the database.
   */
  claimAlertDelivery: (
    d: Omit<AlertDelivery, 'state' | 'attempts' | 'response_status' | 'error' | 'updated_at'> & {
      lease_until: string;
    },
  ) => Promise<boolean>;
  /** Records an attempt's outcome on a delivery, and until when its sender holds it (null once settled). */
  updateAlertDelivery: (id: string, u: AlertDeliveryUpdate) => Promise<void>;
  /**
   * Pending deliveries whose lease ran out before `now` (the instance sending them stopped mid-retry), at
   * most `limit`, oldest lease first: each is now held by the caller until `leaseUntil`, and by no other
   * caller (a conditional update, atomic across instances).
   */
  takeOverAlertDeliveries: (now: string, leaseUntil: string, limit: number) => Promise<AlertDelivery[]>;
  /** An organization's deliveries, newest first. */
  listAlertDeliveries: (orgId: string, limit: number) => Promise<AlertDelivery[]>;
}
