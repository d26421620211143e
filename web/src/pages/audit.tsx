/**
 * The organization's audit log for owners and admins: who did what, when, from where, and what changed;
 * filters by action and person, pages of 100, and the same selection as NDJSON; and how long entries are
 * kept (the owner sets it).
 */
import { useEffect, useState, type FormEvent } from 'react';
import { api, type AuditEntry, type AuditQuery, type OrgView } from '../api.js';
import { PageHeader } from '../components/page-header.js';
import { EmptyState, ErrorState, LoadingState } from '../components/states.js';
import { formatDateTime } from '../lib/format.js';
import { useAction } from '../lib/use-action.js';
import { useAsync } from '../lib/use-async.js';
import { pickOrg } from './team.js';

const ACTIONS = [
  'sign_in',
  'sign_in_failed',
  'key.create',
  'key.rename',
  'key.limits',
  'key.roll',
  'key.revoke',
  'member.invite',
  'member.join',
  'member.role',
  'member.limits',
  'member.remove',
  'invite.revoke',
  'org.create',
  'org.rename',
  'org.audit_retention',
  'settings.signup',
  'alert.create',
  'alert.change',
  'alert.delete',
];

/** The server's own bound (MAX_AUDIT_RETENTION_DAYS). */
const MAX_AUDIT_DAYS = 3650;
const keptFor = (days: number | null) =>
  days === null
    ? 'Entries are kept until an operator drops them.'
    : `Entries older than ${days} days are deleted within the hour.`;

function RetentionForm({ org }: { org: OrgView }) {
  // null until the stored value is read: the field is not editable before it shows it.
  const [days, setDays] = useState<string | null>(null);
  const [saved, setSaved] = useState<string | null>(null);
  const [done, setDone] = useState<string | null>(null);
  const { busy, error, setError, run } = useAction();
  const owner = org.role === 'owner';
  useEffect(() => {
    let live = true;
    api.auditRetention(org.id).then(
      (r) => {
        if (!live) return;
        const v = r.retention_days === null ? '' : String(r.retention_days);
        setDays(v);
        setSaved(v);
      },
      (err: unknown) => live && setError((err as Error).message),
    );
    return () => {
      live = false;
    };
  }, [org.id, setError]);

  const text = days ?? '';
  const n = text.trim() === '' ? 0 : Number(text);
  const invalid = !Number.isInteger(n) || n < 0 || n > MAX_AUDIT_DAYS;

  async function submit(e: FormEvent): Promise<void> {
    e.preventDefault();
    if (invalid) return;
    setDone(null);
    await run(async () => {
      const r = await api.setAuditRetention(org.id, n === 0 ? null : n);
      const v = r.retention_days === null ? '' : String(r.retention_days);
      setDays(v);
      setSaved(v);
      setDone(`Saved. ${keptFor(r.retention_days)}`);
    });
  }

  if (!owner) {
    return (
      <p className="muted small audit-retention" data-testid="audit-retention">
        {days === null ? '' : keptFor(days === '' ? null : Number(days))} Only an owner changes this.
      </p>
    );
  }
  return (
    <form className="form form-narrow audit-retention" onSubmit={(e) => void submit(e)}>
      <div className="field">
        <label htmlFor="audit-retention">Keep audit entries for</label>
        <div className="input-suffix-row">
          <input
            id="audit-retention"
            type="number"
            inputMode="numeric"
            min={0}
            max={MAX_AUDIT_DAYS}
            step={1}
            className="input-short"
            placeholder="Until dropped"
            disabled={days === null}
            value={text}
            aria-describedby="audit-retention-hint"
            aria-invalid={invalid || undefined}
            onChange={(e) => {
              setDays(e.target.value);
              setDone(null);
              setError(null);
            }}
          />
          <span>days</span>
          <button
            type="submit"
            className="btn btn-secondary"
            disabled={busy || days === null || days === saved || invalid}
          >
            {busy ? 'Saving…' : 'Save'}
          </button>
        </div>
        <span id="audit-retention-hint" className="hint">
          Empty or 0: kept until an operator drops them. Entries within this time cannot be changed or
          deleted.
        </span>
        {invalid && (
          <span className="form-error small" role="alert">
            A whole number of days from 0 to {MAX_AUDIT_DAYS.toLocaleString('en-US')}.
          </span>
        )}
      </div>
      {(error !== null || done !== null) && (
        <div
          className={error !== null ? 'form-error' : 'form-success'}
          role={error !== null ? 'alert' : 'status'}
        >
          {error ?? done}
        </div>
      )}
    </form>
  );
}

function Change({ e }: { e: AuditEntry }) {
  const keys = [...new Set([...Object.keys(e.before ?? {}), ...Object.keys(e.after ?? {})])];
  const show = (v: unknown): string =>
    v === null || v === undefined ? '–' : JSON.stringify(v).replace(/^"|"$/g, '');
  // A creation lists what was set; a change, what differs.
  const changed = keys.filter((k) =>
    !e.before ? e.after?.[k] !== null : !e.after || show(e.before[k]) !== show(e.after[k]),
  );
  if (changed.length === 0) return <span className="muted">–</span>;
  return (
    <ul className="audit-change">
      {changed.map((k) => (
        <li key={k}>
          <code>{k}</code> {e.before && <span className="muted">{show(e.before[k])} → </span>}
          {e.after ? show(e.after[k]) : ''}
        </li>
      ))}
    </ul>
  );
}

function AuditTable({ org }: { org: OrgView }) {
  const [action, setAction] = useState('');
  const [actor, setActor] = useState('');
  const [cursor, setCursor] = useState<string | null>(null);
  const query: AuditQuery = { action: action || undefined, actor: actor.trim() || undefined, cursor };
  const page = useAsync(() => api.listAudit(org.id, query), [org.id, action, actor, cursor]);
  const exportHref = `/api/console/orgs/${encodeURIComponent(org.id)}/audit/export?${new URLSearchParams(
    Object.entries({ action, actor: actor.trim() }).filter(([, v]) => v !== ''),
  ).toString()}`;
  return (
    <>
      <div className="audit-filters">
        <div className="field">
          <label htmlFor="audit-action">Action</label>
          <select
            id="audit-action"
            value={action}
            onChange={(e) => {
              setAction(e.target.value);
              setCursor(null);
            }}
          >
            <option value="">Any</option>
            {ACTIONS.map((a) => (
              <option key={a} value={a}>
                {a}
              </option>
            ))}
          </select>
        </div>
        <div className="field">
          <label htmlFor="audit-actor">Person (email)</label>
          <input
            id="audit-actor"
            type="email"
            value={actor}
            onChange={(e) => {
              setActor(e.target.value);
              setCursor(null);
            }}
          />
        </div>
        <a className="btn btn-secondary" href={exportHref} download>
          Export NDJSON
        </a>
      </div>
      {page.error ? (
        <ErrorState error={page.error} onRetry={page.reload} />
      ) : !page.data ? (
        <LoadingState />
      ) : page.data.entries.length === 0 ? (
        <EmptyState title="No entries">Nothing matches these filters.</EmptyState>
      ) : (
        <div className="table-wrap card">
          <table className="table table-stack audit-table">
            <thead>
              <tr>
                <th scope="col">When</th>
                <th scope="col">Who</th>
                <th scope="col">Action</th>
                <th scope="col">Change</th>
                <th scope="col">From</th>
              </tr>
            </thead>
            <tbody>
              {page.data.entries.map((e) => (
                <tr key={e.id} data-action={e.action}>
                  <td className="stack-title nowrap">{formatDateTime(e.at)}</td>
                  <td data-label="Who">{e.actor_email ?? <span className="muted">nobody signed in</span>}</td>
                  <td data-label="Action">
                    <code>{e.action}</code>
                  </td>
                  <td data-label="Change">
                    <Change e={e} />
                  </td>
                  <td data-label="From" className="muted small" title={e.user_agent ?? undefined}>
                    {e.ip ?? '–'}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <div className="audit-pager">
        {cursor && (
          <button type="button" className="btn btn-secondary btn-sm" onClick={() => setCursor(null)}>
            Newest
          </button>
        )}
        {page.data?.next_cursor && (
          <button
            type="button"
            className="btn btn-secondary btn-sm"
            onClick={() => setCursor(page.data!.next_cursor)}
          >
            Older
          </button>
        )}
      </div>
    </>
  );
}

export function AuditPage() {
  const orgs = useAsync(() => api.listOrgs(), []);
  if (orgs.error) return <ErrorState error={orgs.error} onRetry={orgs.reload} />;
  if (!orgs.data) return <LoadingState />;
  const org = pickOrg(orgs.data.orgs);
  if (!org) return <EmptyState title="No organization" />;
  return (
    <>
      <PageHeader
        title="Audit log"
        description={`Sign-ins and every change to keys, members and settings in ${org.personal ? 'your personal organization' : org.name}.`}
      />
      {org.role === 'owner' || org.role === 'admin' ? (
        <>
          <RetentionForm org={org} />
          <AuditTable org={org} />
        </>
      ) : (
        <EmptyState title="Owners and admins only">Ask an admin of this organization.</EmptyState>
      )}
    </>
  );
}
