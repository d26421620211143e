/**
 * The organization picked in the switcher: its members (roles, removal), its invitations (links shown
 * once), and a new organization. What a role may do is the server's to decide (docs/teams.md); the page
 * only hides controls the role cannot use.
 */
import { useEffect, useState, type FormEvent } from 'react';
import { api, currentOrg, setCurrentOrg, type Membership, type OrgRole, type OrgView } from '../api.js';
import { Badge } from '../components/badge.js';
import { CopyButton } from '../components/copy-button.js';
import { Dialog } from '../components/dialog.js';
import { MemberLimitsDialog } from '../components/member-limits-dialog.js';
import { PageHeader } from '../components/page-header.js';
import { EmptyState, ErrorState, LoadingState } from '../components/states.js';
import { formatDate, formatRelative } from '../lib/format.js';
import { summarizeMemberLimits } from '../lib/limits.js';
import { useAction } from '../lib/use-action.js';
import { useAsync } from '../lib/use-async.js';
import { useSession } from '../session.js';
import { Link } from '../router.js';
import { SsoSettings } from './sso-settings.js';

const ROLES: OrgRole[] = ['owner', 'admin', 'member', 'viewer'];
const ROLE_TEXT: Record<OrgRole, string> = {
  owner: 'Owner',
  admin: 'Admin',
  member: 'Member',
  viewer: 'Viewer',
};
const manages = (r: OrgRole) => r === 'owner' || r === 'admin';

/** The organization the console is in: the stored pick if the account is still a member, else the personal one. */
export function pickOrg(orgs: OrgView[]): OrgView | undefined {
  const id = currentOrg();
  return orgs.find((o) => o.id === id) ?? orgs.find((o) => o.personal) ?? orgs[0];
}

function switchTo(id: string): void {
  setCurrentOrg(id);
  // Every page reads in the organization it loaded with: start them all again.
  window.location.reload();
}

function RemoveDialog({
  org,
  member,
  members,
  onClose,
  onDone,
}: {
  org: OrgView;
  member: Membership | null;
  members: Membership[];
  onClose: () => void;
  onDone: () => void;
}) {
  const [transferTo, setTransferTo] = useState('');
  const { busy, error, run } = useAction();
  const holders = members.filter((m) => m.account_id !== member?.account_id && m.role !== 'viewer');
  return (
    <Dialog
      open={member !== null}
      title={`Remove ${member?.email ?? ''}`}
      onClose={onClose}
      footer={
        <>
          <button type="button" className="btn btn-secondary" onClick={onClose}>
            Cancel
          </button>
          <button
            type="button"
            className="btn btn-danger"
            disabled={busy}
            onClick={() =>
              void run(async () => {
                await api.removeMember(org.id, member!.account_id, transferTo || undefined);
                onDone();
              })
            }
          >
            {busy ? 'Removing…' : 'Remove member'}
          </button>
        </>
      }
    >
      <p>They lose access to {org.name} at once. Their keys here:</p>
      <div className="field">
        <label htmlFor="transfer-to">Keys</label>
        <select id="transfer-to" value={transferTo} onChange={(e) => setTransferTo(e.target.value)}>
          <option value="">Revoke them</option>
          {holders.map((m) => (
            <option key={m.account_id} value={m.account_id}>
              Give them to {m.email}
            </option>
          ))}
        </select>
      </div>
      {error && (
        <div className="form-error" role="alert">
          {error}
        </div>
      )}
    </Dialog>
  );
}

function Invites({ org }: { org: OrgView }) {
  const invites = useAsync(() => api.listInvites(org.id), [org.id]);
  const [role, setRole] = useState<OrgRole>('member');
  const [link, setLink] = useState<string | null>(null);
  const { busy, error, run } = useAction();
  const roles = org.role === 'owner' ? ROLES : ROLES.filter((r) => r !== 'owner');

  async function create(e: FormEvent): Promise<void> {
    e.preventDefault();
    await run(async () => {
      const { token } = await api.createInvite(org.id, role);
      setLink(`${window.location.origin}/invite#${token}`);
      invites.reload();
    });
  }

  return (
    <section className="card section" aria-labelledby="invites-h">
      <h2 id="invites-h">Invitations</h2>
      <p className="muted">A link works once, for 7 days. The invitee signs up or signs in through it.</p>
      <form className="team-invite-form" onSubmit={(e) => void create(e)}>
        <div className="field">
          <label htmlFor="invite-role">Role</label>
          <select id="invite-role" value={role} onChange={(e) => setRole(e.target.value as OrgRole)}>
            {roles.map((r) => (
              <option key={r} value={r}>
                {ROLE_TEXT[r]}
              </option>
            ))}
          </select>
        </div>
        <button type="submit" className="btn btn-primary" disabled={busy}>
          {busy ? 'Creating…' : 'Create invite link'}
        </button>
      </form>
      {error && (
        <div className="form-error" role="alert">
          {error}
        </div>
      )}
      {link && (
        <div className="key-reveal">
          <div className="key-reveal-row">
            <code className="key-value" data-testid="invite-link">
              {link}
            </code>
            <CopyButton text={link} label="Copy link" />
          </div>
          <p className="key-reveal-note">
            <strong>Copy it now — it is not shown again.</strong> Send it to the person you invite.
          </p>
        </div>
      )}
      {invites.error ? (
        <ErrorState error={invites.error} onRetry={invites.reload} />
      ) : invites.data && invites.data.invites.length > 0 ? (
        <div className="table-wrap">
          <table className="table table-stack">
            <thead>
              <tr>
                <th scope="col">Role</th>
                <th scope="col">Expires</th>
                <th scope="col">
                  <span className="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {invites.data.invites.map((i) => (
                <tr key={i.id}>
                  <td className="stack-title">{ROLE_TEXT[i.role]} invitation</td>
                  <td data-label="Expires">{formatRelative(i.expires_at)}</td>
                  <td className="actions-cell">
                    <button
                      type="button"
                      className="btn btn-danger-ghost btn-xs"
                      onClick={() => void api.revokeInvite(org.id, i.id).then(invites.reload)}
                    >
                      Revoke
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
    </section>
  );
}

function NewOrgForm() {
  const [name, setName] = useState('');
  const { busy, error, run } = useAction();
  async function submit(e: FormEvent): Promise<void> {
    e.preventDefault();
    await run(async () => {
      const { org } = await api.createOrg(name);
      switchTo(org.id);
    });
  }
  return (
    <section className="card section" aria-labelledby="new-org-h">
      <h2 id="new-org-h">New organization</h2>
      <form className="team-invite-form" onSubmit={(e) => void submit(e)}>
        <div className="field">
          <label htmlFor="org-name">Name</label>
          <input
            id="org-name"
            required
            maxLength={100}
            value={name}
            onChange={(e) => setName(e.target.value)}
          />
        </div>
        <button type="submit" className="btn btn-secondary" disabled={busy}>
          Create
        </button>
      </form>
      {error && (
        <div className="form-error" role="alert">
          {error}
        </div>
      )}
    </section>
  );
}

function Members({ org }: { org: OrgView }) {
  const { account } = useSession();
  const members = useAsync(() => api.listMembers(org.id), [org.id]);
  const [removing, setRemoving] = useState<Membership | null>(null);
  const [limiting, setLimiting] = useState<Membership | null>(null);
  const [problem, setProblem] = useState<string | null>(null);
  const canManage = manages(org.role);

  function changeRole(m: Membership, role: OrgRole): void {
    setProblem(null);
    api.setMemberRole(org.id, m.account_id, role).then(members.reload, (e: Error) => setProblem(e.message));
  }

  if (members.error) return <ErrorState error={members.error} onRetry={members.reload} />;
  if (!members.data) return <LoadingState />;
  const list = members.data.members;
  return (
    <section className="card section" aria-labelledby="members-h">
      <h2 id="members-h">Members</h2>
      {problem && (
        <div className="form-error" role="alert">
          {problem}
        </div>
      )}
      <div className="table-wrap">
        <table className="table table-stack team-table">
          <thead>
            <tr>
              <th scope="col">Email</th>
              <th scope="col">Role</th>
              <th scope="col">Joined</th>
              <th scope="col">Limits</th>
              <th scope="col">
                <span className="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {list.map((m) => {
              // Owners are changed by owners only; the server refuses the rest anyway.
              const editable = canManage && (org.role === 'owner' || m.role !== 'owner');
              return (
                <tr key={m.account_id} data-member={m.email}>
                  <td className="stack-title">
                    {m.email}
                    {m.account_id === account.id && <span className="muted small"> (you)</span>}
                  </td>
                  <td data-label="Role">
                    {editable ? (
                      <select
                        aria-label={`Role of ${m.email}`}
                        value={m.role}
                        onChange={(e) => changeRole(m, e.target.value as OrgRole)}
                      >
                        {(org.role === 'owner' ? ROLES : ROLES.filter((r) => r !== 'owner')).map((r) => (
                          <option key={r} value={r}>
                            {ROLE_TEXT[r]}
                          </option>
                        ))}
                      </select>
                    ) : (
                      <Badge tone={m.role === 'owner' ? 'blue' : 'gray'}>{ROLE_TEXT[m.role]}</Badge>
                    )}
                  </td>
                  <td data-label="Joined">{formatDate(m.created_at)}</td>
                  <td data-label="Limits">
                    {summarizeMemberLimits(m.limits) ?? <span className="muted">None</span>}
                  </td>
                  <td className="actions-cell">
                    <div className="row-actions">
                      {editable && (
                        <button
                          type="button"
                          className="btn btn-secondary btn-xs"
                          aria-label={`Limits of ${m.email}`}
                          onClick={() => setLimiting(m)}
                        >
                          Limits
                        </button>
                      )}
                      {editable && m.account_id !== account.id && (
                        <button
                          type="button"
                          className="btn btn-danger-ghost btn-xs"
                          aria-label={`Remove ${m.email}`}
                          onClick={() => setRemoving(m)}
                        >
                          Remove
                        </button>
                      )}
                    </div>
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      </div>
      <MemberLimitsDialog
        org={org.id}
        member={limiting}
        onClose={() => setLimiting(null)}
        onSaved={members.reload}
      />
      <RemoveDialog
        org={org}
        member={removing}
        members={list}
        onClose={() => setRemoving(null)}
        onDone={() => {
          setRemoving(null);
          members.reload();
        }}
      />
    </section>
  );
}

export function TeamPage() {
  const orgs = useAsync(() => api.listOrgs(), []);
  if (orgs.error) return <ErrorState error={orgs.error} onRetry={orgs.reload} />;
  if (!orgs.data) return <LoadingState />;
  const org = pickOrg(orgs.data.orgs);
  if (!org) return <EmptyState title="No organization" />;
  return (
    <>
      <PageHeader
        title={org.personal ? 'Personal organization' : org.name}
        description={
          <>
            You are {org.role === 'admin' || org.role === 'owner' ? 'an' : 'a'}{' '}
            {ROLE_TEXT[org.role].toLowerCase()} here. Keys, requests and usage show this organization.
          </>
        }
      />
      <Members org={org} />
      {manages(org.role) && <Invites org={org} />}
      {org.role === 'owner' && !org.personal && <SsoSettings org={org} />}
      {manages(org.role) && (
        <p>
          <Link to="/audit">Audit log</Link> — sign-ins and every change in this organization.
        </p>
      )}
      {manages(org.role) && (
        <p>
          <Link to="/alerts">Alerts</Link> — webhooks told when a budget is nearly spent, calls fail or spend
          jumps.
        </p>
      )}
      <NewOrgForm />
    </>
  );
}

/** The organization switcher in the side bar: shown once the account is in more than one. */
export function OrgSwitcher() {
  const orgs = useAsync(() => api.listOrgs(), []);
  const list = orgs.data?.orgs ?? [];
  useEffect(() => {
    // A pick from an organization the account has left (or was removed from): back to the personal one.
    const id = currentOrg();
    if (orgs.data && id && !orgs.data.orgs.some((o) => o.id === id)) {
      setCurrentOrg(null);
      window.location.reload();
    }
  }, [orgs.data]);
  if (list.length < 2) return null;
  const org = pickOrg(list);
  return (
    <div className="org-switcher">
      <label htmlFor="org-switch" className="muted small">
        Organization
      </label>
      <select id="org-switch" value={org?.id} onChange={(e) => switchTo(e.target.value)}>
        {list.map((o) => (
          <option key={o.id} value={o.id}>
            {o.personal ? 'Personal' : o.name}
          </option>
        ))}
      </select>
    </div>
  );
}
