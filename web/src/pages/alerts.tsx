/**
 * The organization's alert rules and their delivery log, for owners and admins (docs/alerts.md): a rule
 * watches a budget, an error rate or a spend spike of the organization, a member or a key, and sends a
 * signed webhook (or a Slack message); each delivery shows its state, attempts and last error.
 */
import { useState, type FormEvent, type ReactNode } from 'react';
import { api, ApiError, type AlertDelivery, type AlertRule, type OrgView } from '../api.js';
import { PageHeader } from '../components/page-header.js';
import { EmptyState, ErrorState, LoadingState } from '../components/states.js';
import { formatDateTime } from '../lib/format.js';
import { useAsync } from '../lib/use-async.js';
import { pickOrg } from './team.js';

type Kind = AlertRule['kind'];

const KIND_TEXT: Record<Kind, string> = {
  budget: 'Budget thresholds',
  error_rate: 'Error rate',
  spend_spike: 'Spend spike',
  new_credential: 'New provider credential',
};

function describeParams(r: AlertRule): string {
  const p = r.params as unknown as Record<string, number | string | number[] | undefined>;
  const v = (name: string) => String(p[name] ?? '–');
  if (r.kind === 'budget')
    return `$${v('budget_usd')} a ${v('period')}; at ${(p.thresholds as number[]).join(', ')} %`;
  if (r.kind === 'error_rate')
    return `≥ ${v('threshold_percent')} % in ${v('window_minutes')} min (≥ ${v('min_requests')} calls)`;
  if (r.kind === 'new_credential')
    return `a credential not used in the ${v('known_days')} days before the rule`;
  return `${v('factor')}× the ${v('baseline_days')}-day mean, ≥ $${v('min_usd')}`;
}

function NewRuleForm({ org, onCreated }: { org: OrgView; onCreated: (r: AlertRule) => void }) {
  const [kind, setKind] = useState<Kind>('budget');
  const [name, setName] = useState('');
  const [scope, setScope] = useState<AlertRule['scope']>('org');
  const [scopeId, setScopeId] = useState('');
  const [url, setUrl] = useState('');
  const [format, setFormat] = useState<AlertRule['format']>('json');
  const [budget, setBudget] = useState('100');
  const [period, setPeriod] = useState<'day' | 'month'>('month');
  const [thresholds, setThresholds] = useState('50, 80, 100');
  const [windowMinutes, setWindowMinutes] = useState('15');
  const [percent, setPercent] = useState('20');
  const [factor, setFactor] = useState('3');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  function params(): Record<string, unknown> {
    if (kind === 'budget')
      return {
        budget_usd: Number(budget),
        period,
        thresholds: thresholds
          .split(/[\s,]+/)
          .filter(Boolean)
          .map(Number),
      };
    if (kind === 'error_rate')
      return { window_minutes: Number(windowMinutes), threshold_percent: Number(percent) };
    if (kind === 'new_credential') return {};
    return { factor: Number(factor) };
  }

  async function submit(e: FormEvent) {
    e.preventDefault();
    setError(null);
    setBusy(true);
    try {
      const rule = await api.createAlertRule(org.id, {
        name,
        kind,
        scope,
        ...(scope === 'org' ? {} : { scope_id: scopeId.trim() }),
        params: params(),
        url: url.trim(),
        format,
      });
      setName('');
      setUrl('');
      onCreated(rule);
    } catch (err) {
      setError(err instanceof ApiError ? err.message : 'Could not save the rule.');
    } finally {
      setBusy(false);
    }
  }

  const field = (id: string, label: string, input: ReactNode) => (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      {input}
    </div>
  );
  return (
    <form className="form form-narrow card" aria-label="New alert rule" onSubmit={(e) => void submit(e)}>
      {field(
        'alert-name',
        'Name',
        <input
          id="alert-name"
          required
          maxLength={100}
          value={name}
          onChange={(e) => setName(e.target.value)}
        />,
      )}
      {field(
        'alert-kind',
        'When',
        <select id="alert-kind" value={kind} onChange={(e) => setKind(e.target.value as Kind)}>
          {(Object.keys(KIND_TEXT) as Kind[]).map((k) => (
            <option key={k} value={k}>
              {KIND_TEXT[k]}
            </option>
          ))}
        </select>,
      )}
      {kind === 'budget' && (
        <>
          {field(
            'alert-budget',
            'Budget (USD)',
            <input
              id="alert-budget"
              type="number"
              min="0"
              step="any"
              required
              value={budget}
              onChange={(e) => setBudget(e.target.value)}
            />,
          )}
          {field(
            'alert-period',
            'Period',
            <select
              id="alert-period"
              value={period}
              onChange={(e) => setPeriod(e.target.value as 'day' | 'month')}
            >
              <option value="month">Month (UTC)</option>
              <option value="day">Day (UTC)</option>
            </select>,
          )}
          {field(
            'alert-thresholds',
            'Thresholds (%)',
            <input
              id="alert-thresholds"
              required
              value={thresholds}
              onChange={(e) => setThresholds(e.target.value)}
            />,
          )}
        </>
      )}
      {kind === 'error_rate' && (
        <>
          {field(
            'alert-window',
            'Window (minutes)',
            <input
              id="alert-window"
              type="number"
              min="1"
              max="1440"
              required
              value={windowMinutes}
              onChange={(e) => setWindowMinutes(e.target.value)}
            />,
          )}
          {field(
            'alert-percent',
            'Failed calls (%)',
            <input
              id="alert-percent"
              type="number"
              min="0.1"
              max="100"
              step="any"
              required
              value={percent}
              onChange={(e) => setPercent(e.target.value)}
            />,
          )}
        </>
      )}
      {kind === 'spend_spike' &&
        field(
          'alert-factor',
          'Times the 7-day daily mean',
          <input
            id="alert-factor"
            type="number"
            min="1.1"
            step="any"
            required
            value={factor}
            onChange={(e) => setFactor(e.target.value)}
          />,
        )}
      {field(
        'alert-scope',
        'Whose calls',
        <select
          id="alert-scope"
          value={scope}
          onChange={(e) => setScope(e.target.value as AlertRule['scope'])}
        >
          <option value="org">The whole organization</option>
          <option value="member">One member (account id)</option>
          <option value="key">One key (key id)</option>
        </select>,
      )}
      {scope !== 'org' &&
        field(
          'alert-scope-id',
          scope === 'key' ? 'Key id' : 'Member account id',
          <input id="alert-scope-id" required value={scopeId} onChange={(e) => setScopeId(e.target.value)} />,
        )}
      {field(
        'alert-url',
        'Webhook URL',
        <input id="alert-url" type="url" required value={url} onChange={(e) => setUrl(e.target.value)} />,
      )}
      {field(
        'alert-format',
        'Body',
        <select
          id="alert-format"
          value={format}
          onChange={(e) => setFormat(e.target.value as AlertRule['format'])}
        >
          <option value="json">Signed JSON</option>
          <option value="slack">Slack incoming webhook</option>
        </select>,
      )}
      {error && (
        <div className="form-error" role="alert">
          {error}
        </div>
      )}
      <div>
        <button type="submit" className="btn btn-primary" disabled={busy}>
          {busy ? 'Saving…' : 'Add rule'}
        </button>
      </div>
    </form>
  );
}

function Rules({ org, rules, onChange }: { org: OrgView; rules: AlertRule[]; onChange: () => void }) {
  if (rules.length === 0) return <EmptyState title="No alert rules">Add one below.</EmptyState>;
  return (
    <div className="table-wrap card">
      <table className="table table-stack" aria-label="Alert rules">
        <thead>
          <tr>
            <th scope="col">Rule</th>
            <th scope="col">When</th>
            <th scope="col">Whose</th>
            <th scope="col">Sends to</th>
            <th scope="col">Secret</th>
            <th scope="col" />
          </tr>
        </thead>
        <tbody>
          {rules.map((r) => (
            <tr key={r.id} data-rule={r.name}>
              <td className="stack-title">
                {r.name} {!r.enabled && <span className="muted">(off)</span>}
              </td>
              <td data-label="When">
                {KIND_TEXT[r.kind]}: {describeParams(r)}
              </td>
              <td data-label="Whose">{r.scope === 'org' ? 'organization' : `${r.scope} ${r.scope_id}`}</td>
              <td data-label="Sends to" className="small">
                {r.url} ({r.format})
              </td>
              <td data-label="Secret">
                <code className="small">{r.secret}</code>
              </td>
              <td className="nowrap">
                <button
                  type="button"
                  className="btn btn-secondary btn-sm"
                  onClick={() => void api.setAlertRuleEnabled(org.id, r.id, !r.enabled).then(onChange)}
                >
                  {r.enabled ? 'Turn off' : 'Turn on'}
                </button>{' '}
                <button
                  type="button"
                  className="btn btn-secondary btn-sm"
                  onClick={() => void api.deleteAlertRule(org.id, r.id).then(onChange)}
                >
                  Delete
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function Deliveries({ deliveries, rules }: { deliveries: AlertDelivery[]; rules: AlertRule[] }) {
  if (deliveries.length === 0)
    return <EmptyState title="Nothing sent yet">Deliveries show here as rules fire.</EmptyState>;
  const names = new Map(rules.map((r) => [r.id, r.name]));
  return (
    <div className="table-wrap card">
      <table className="table table-stack" aria-label="Deliveries">
        <thead>
          <tr>
            <th scope="col">When</th>
            <th scope="col">Rule</th>
            <th scope="col">Occasion</th>
            <th scope="col">State</th>
            <th scope="col">Attempts</th>
            <th scope="col">Last answer</th>
          </tr>
        </thead>
        <tbody>
          {deliveries.map((d) => (
            <tr key={d.id} data-state={d.state}>
              <td className="stack-title nowrap">{formatDateTime(d.created_at)}</td>
              <td data-label="Rule">{names.get(d.rule_id) ?? d.rule_id}</td>
              <td data-label="Occasion">
                <code className="small">{d.dedupe_key}</code>
              </td>
              <td data-label="State">{d.state}</td>
              <td data-label="Attempts">{d.attempts}</td>
              <td data-label="Last answer" className="small">
                {d.response_status ?? '–'}
                {d.error && <div className="form-error">{d.error}</div>}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function AlertsOf({ org }: { org: OrgView }) {
  const data = useAsync(
    async () => ({
      rules: (await api.listAlertRules(org.id)).rules,
      deliveries: (await api.listAlertDeliveries(org.id)).deliveries,
    }),
    [org.id],
  );
  if (data.error) return <ErrorState error={data.error} onRetry={data.reload} />;
  if (!data.data) return <LoadingState />;
  return (
    <>
      <h2>Rules</h2>
      <Rules org={org} rules={data.data.rules} onChange={data.reload} />
      <h2>Deliveries</h2>
      <Deliveries deliveries={data.data.deliveries} rules={data.data.rules} />
      <h2>New rule</h2>
      <NewRuleForm org={org} onCreated={data.reload} />
    </>
  );
}

export function AlertsPage() {
  const orgs = useAsync(() => api.listOrgs(), []);
  if (orgs.error) return <ErrorState error={orgs.error} onRetry={orgs.reload} />;
  if (!orgs.data) return <LoadingState />;
  const org = pickOrg(orgs.data.orgs);
  if (!org) return <EmptyState title="No organization" />;
  return (
    <>
      <PageHeader
        title="Alerts"
        description="Webhooks (or Slack) told when a budget is nearly spent, calls fail or spend jumps; each delivery is signed with the rule's secret."
      />
      {org.role === 'owner' || org.role === 'admin' ? (
        <AlertsOf org={org} />
      ) : (
        <EmptyState title="Owners and admins only">Ask an admin of this organization.</EmptyState>
      )}
    </>
  );
}
