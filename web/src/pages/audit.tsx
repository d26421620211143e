/**
 * The organization's audit log for owners and admins: who did what, when, from where, and what changed;
 * filters by action and person, pages of 100, and the same selection as NDJSON; and how long entries are
 * kept (the owner sets it).
 */
import { useCallback, useEffect, useState } from 'react';
import { api, type AuditEntry, type AuditQuery, type OrgView } from '../api.js';
import { PageHeader } from '../components/page-header.js';
import { RetentionDaysForm } from '../components/retention-form.js';
import { EmptyState, ErrorState, LoadingState } from '../components/states.js';
import { formatDateTime } from '../lib/format.js';
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
  const load = useCallback(() => api.auditRetention(org.id).then((r) => r.retention_days), [org.id]);
  const [stored, setStored] = useState<number | null | undefined>(undefined);
  useEffect(() => {
    let live = true;
    if (org.role !== 'owner')
      void load().then(
        (d) => live && setStored(d),
        () => undefined,
      );
    return () => {
      live = false;
    };
  }, [load, org.role]);

  if (org.role !== 'owner') {
    return (
      <p className="muted small audit-retention" data-testid="audit-retention">
        {stored === undefined ? '' : keptFor(stored)} Only an owner changes this.
      </p>
    );
  }
  return (
    <RetentionDaysForm
      id="audit-retention"
      className="audit-retention"
      label="Keep audit entries for"
      max={MAX_AUDIT_DAYS}
      placeholder="Until dropped"
      hint="Empty or 0: kept until an operator drops them. Entries within this time cannot be changed or deleted."
      load={load}
      save={(days) => api.setAuditRetention(org.id, days).then((r) => r.retention_days)}
      savedText={keptFor}
    />
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
