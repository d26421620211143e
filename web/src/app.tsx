import { lazy, Suspense, useCallback, useEffect, useMemo, useState } from 'react';
import {
  api,
  setUnauthenticatedHandler,
  type Account,
  type CreatedKey,
  type Info,
  type SignupNotice,
} from './api.js';
import { SignupNotices } from './components/signup-notices.js';
import { Shell } from './components/shell.js';
import { ErrorState, LoadingState } from './components/states.js';
import { AuthPage } from './pages/auth.js';
import { KeysPage } from './pages/keys.js';
import { NotFoundPage } from './pages/not-found.js';
import { OverviewPage } from './pages/overview.js';
import { RequestDetailPage } from './pages/request-detail.js';
import { ConnectionDetailPage } from './pages/connection-detail.js';
import { RequestsPage } from './pages/requests.js';
import { SettingsPage } from './pages/settings.js';
import { InvitePage } from './pages/invite.js';
import { TeamPage } from './pages/team.js';
import { AlertsPage } from './pages/alerts.js';
import { AuditPage } from './pages/audit.js';
import { CredentialsPage } from './pages/credentials.js';
import { ReconcilePage } from './pages/reconcile.js';
import { SessionsPage } from './pages/sessions.js';
import { SessionDetailPage } from './pages/session-detail.js';
import { matchPath, navigate, useLocation } from './router.js';
import { SessionContext, type Session } from './session.js';

// recharts is most of the bundle; load it only when someone opens Usage.
const UsagePage = lazy(() => import('./pages/usage.js').then((m) => ({ default: m.UsagePage })));
// An end user's page charts its usage: recharts again.
const EndUserPage = lazy(() => import('./pages/end-user.js').then((m) => ({ default: m.EndUserPage })));

const PUBLIC_PATHS = ['/login', '/signup'];

function safeNext(next: string | null): string {
  // Only same-site paths: "//evil.example" would be an open redirect.
  return next && next.startsWith('/') && !next.startsWith('//') ? next : '/';
}

export function App() {
  const { pathname, search, query } = useLocation();
  const [info, setInfo] = useState<Info | null>(null);
  const [account, setAccount] = useState<Account | null | undefined>(undefined);
  const [revealedKey, setRevealedKey] = useState<CreatedKey | null>(null);
  const [notices, setNotices] = useState<SignupNotice[]>([]);
  const [bootError, setBootError] = useState<Error | null>(null);
  const [bootTick, setBootTick] = useState(0);

  useEffect(() => {
    setBootError(null);
    api.info().then(setInfo, (e: Error) => setBootError(e));
    api.me().then(
      (r) => setAccount(r.account),
      (e: Error & { status?: number }) => {
        if (e.status === 401) setAccount(null);
        else setBootError(e);
      },
    );
  }, [bootTick]);

  useEffect(() => {
    // The effect below then sends the person to log in (or, on a fresh install, to sign up).
    setUnauthenticatedHandler(() => {
      setAccount(null);
      setRevealedKey(null);
    });
  }, []);

  const isPublic = PUBLIC_PATHS.includes(pathname);
  // An invitation link says what it is for before anyone signs in.
  const isInvite = pathname === '/invite';
  useEffect(() => {
    if (account === null && !isPublic && !isInvite && info) {
      const next = pathname === '/' ? '' : `?next=${encodeURIComponent(pathname + search)}`;
      // A fresh install has nobody to log in: open on sign-up, as the README says.
      const start = info?.fresh_install && info.signup !== 'closed' ? '/signup' : '/login';
      navigate(`${start}${next}`, { replace: true });
    } else if (account && isPublic) {
      navigate(safeNext(query.get('next')), { replace: true });
    }
  }, [account, isPublic, isInvite, pathname, search, query, info]);

  const signOut = useCallback(async () => {
    try {
      await api.logout();
    } finally {
      setAccount(null);
      setRevealedKey(null);
      navigate('/login');
    }
  }, []);

  const session = useMemo<Session | null>(
    () =>
      info && account
        ? { info, account, revealedKey, forgetRevealedKey: () => setRevealedKey(null), signOut }
        : null,
    [info, account, revealedKey, signOut],
  );

  if (bootError) {
    return (
      <div className="auth-wrap">
        <ErrorState error={bootError} onRetry={() => setBootTick((t) => t + 1)} />
      </div>
    );
  }
  if (!info || account === undefined) return <LoadingState label="Loading keyrelay…" />;

  if (isInvite && !session) return <InvitePage signedIn={false} />;
  if (isPublic || !session) {
    if (!isPublic) return <LoadingState />;
    return (
      <AuthPage
        mode={pathname === '/signup' ? 'signup' : 'login'}
        info={info}
        onSignedIn={(acc, key, signupNotices) => {
          if (key) setRevealedKey(key);
          setNotices(signupNotices);
          setAccount(acc);
          const next = safeNext(query.get('next'));
          navigate(key && next !== '/invite' ? '/' : next, { replace: true });
        }}
      />
    );
  }

  const detail = matchPath('/requests/:id', pathname);
  const connection = matchPath('/connections/:id', pathname);
  const sessionDetail = matchPath('/sessions/:id', pathname);
  const endUser = matchPath('/end-users/:id', pathname);
  let page;
  if (pathname === '/') page = <OverviewPage />;
  else if (pathname === '/keys') page = <KeysPage />;
  else if (pathname === '/requests') page = <RequestsPage />;
  else if (detail) page = <RequestDetailPage id={detail.id!} />;
  else if (connection) page = <ConnectionDetailPage id={connection.id!} />;
  else if (pathname === '/sessions') page = <SessionsPage />;
  else if (sessionDetail) page = <SessionDetailPage id={sessionDetail.id!} />;
  else if (endUser) page = <EndUserPage id={endUser.id!} />;
  else if (pathname === '/usage') page = <UsagePage />;
  else if (pathname === '/credentials') page = <CredentialsPage />;
  else if (pathname === '/settings') page = <SettingsPage />;
  else if (pathname === '/team') page = <TeamPage />;
  else if (pathname === '/audit') page = <AuditPage />;
  else if (pathname === '/reconcile') page = <ReconcilePage />;
  else if (pathname === '/alerts') page = <AlertsPage />;
  else if (isInvite) page = <InvitePage signedIn />;
  else page = <NotFoundPage />;

  return (
    <SessionContext.Provider value={session}>
      <Shell>
        <SignupNotices notices={notices} onDismiss={() => setNotices([])} />
        <Suspense fallback={<LoadingState />}>{page}</Suspense>
      </Shell>
    </SessionContext.Provider>
  );
}
