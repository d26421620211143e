import { useEffect, useRef, useState, type ReactNode } from 'react';
import { Link, useLocation } from '../router.js';
import { useSession } from '../session.js';
import { OrgSwitcher } from '../pages/team.js';

const NAV = [
  { to: '/', label: 'Overview', icon: 'M3 10.5 12 3l9 7.5V21h-6v-6H9v6H3z' },
  { to: '/keys', label: 'Keys', icon: 'M15 7a4 4 0 1 1-3.9 5H8v3H5v-3H3V9h8.1A4 4 0 0 1 15 7z' },
  { to: '/requests', label: 'Requests', icon: 'M4 6h16M4 12h16M4 18h10' },
  {
    to: '/sessions',
    label: 'Sessions',
    icon: 'M4 5h4v4H4zm12 0h4v4h-4zM10 15h4v4h-4zM8 7h8M6 9v3h12V9m-6 3v3',
  },
  { to: '/usage', label: 'Usage', icon: 'M4 20V10m6 10V4m6 16v-7m4 7H2' },
  { to: '/credentials', label: 'Credentials', icon: 'M5 11V7a7 7 0 0 1 14 0v4M4 11h16v10H4zM12 15v2' },
  {
    to: '/team',
    label: 'Team',
    icon: 'M9 11a4 4 0 1 0 0-8 4 4 0 0 0 0 8zm-7 10v-1a6 6 0 0 1 12 0v1m3-10a3 3 0 1 0 0-6m2 16v-1a5 5 0 0 0-3-4.6',
  },
  {
    to: '/settings',
    label: 'Settings',
    icon: 'M12 15a3 3 0 1 0 0-6 3 3 0 0 0 0 6zm7.4-3a7.4 7.4 0 0 0-.1-1.3l2-1.6-2-3.4-2.4 1a7.5 7.5 0 0 0-2.2-1.3L14.3 3h-4.6l-.4 2.4a7.5 7.5 0 0 0-2.2 1.3l-2.4-1-2 3.4 2 1.6a7.4 7.4 0 0 0 0 2.6l-2 1.6 2 3.4 2.4-1a7.5 7.5 0 0 0 2.2 1.3l.4 2.4h4.6l.4-2.4a7.5 7.5 0 0 0 2.2-1.3l2.4 1 2-3.4-2-1.6c.1-.4.1-.9.1-1.3z',
  },
];

export function Logo() {
  return (
    <span className="logo">
      <svg viewBox="0 0 32 32" width="22" height="22" aria-hidden="true">
        <rect width="32" height="32" rx="8" fill="var(--accent)" />
        <path
          d="M9 16h9m0 0-4-4m4 4-4 4M20 10v12"
          stroke="#fff"
          strokeWidth="2.6"
          fill="none"
          strokeLinecap="round"
          strokeLinejoin="round"
        />
      </svg>
      keyrelay
    </span>
  );
}

function isActive(to: string, pathname: string): boolean {
  return to === '/' ? pathname === '/' : pathname === to || pathname.startsWith(`${to}/`);
}

export function Shell({ children }: { children: ReactNode }) {
  const { pathname } = useLocation();
  const { account, signOut } = useSession();
  const [menuOpen, setMenuOpen] = useState(false);
  const shownPath = useRef(pathname);
  useEffect(() => {
    setMenuOpen(false);
    // After a client-side navigation, move focus to the new page as a full page load would.
    if (shownPath.current === pathname) return;
    shownPath.current = pathname;
    document.getElementById('main')?.focus({ preventScroll: true });
  }, [pathname]);
  useEffect(() => {
    if (!menuOpen) return;
    const onKey = (e: KeyboardEvent) => {
      if (e.key === 'Escape') setMenuOpen(false);
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [menuOpen]);

  return (
    <div className="shell">
      <a className="skip-link" href="#main">
        Skip to content
      </a>
      <aside className={`sidebar ${menuOpen ? 'open' : ''}`}>
        <div className="sidebar-top">
          <Link to="/" className="brand" aria-label="keyrelay home">
            <Logo />
          </Link>
          <button
            type="button"
            className="icon-btn menu-btn"
            aria-expanded={menuOpen}
            aria-controls="main-nav"
            aria-label={menuOpen ? 'Close menu' : 'Open menu'}
            onClick={() => setMenuOpen((o) => !o)}
          >
            <svg viewBox="0 0 24 24" width="20" height="20" aria-hidden="true">
              <path
                d={menuOpen ? 'M6 6l12 12M18 6 6 18' : 'M4 7h16M4 12h16M4 17h16'}
                stroke="currentColor"
                strokeWidth="2"
                strokeLinecap="round"
              />
            </svg>
          </button>
        </div>
        <nav id="main-nav" aria-label="Main" className="nav">
          <ul>
            {NAV.map((n) => (
              <li key={n.to}>
                <Link
                  to={n.to}
                  className={isActive(n.to, pathname) ? 'active' : ''}
                  aria-current={isActive(n.to, pathname) ? 'page' : undefined}
                >
                  <svg viewBox="0 0 24 24" width="16" height="16" aria-hidden="true">
                    <path
                      d={n.icon}
                      stroke="currentColor"
                      strokeWidth="1.8"
                      fill="none"
                      strokeLinejoin="round"
                      strokeLinecap="round"
                    />
                  </svg>
                  {n.label}
                </Link>
              </li>
            ))}
          </ul>
          <OrgSwitcher />
          <div className="nav-account">
            <span className="nav-email" title={account.email}>
              {account.email}
            </span>
            <button type="button" className="btn btn-ghost btn-sm" onClick={() => void signOut()}>
              Log out
            </button>
          </div>
        </nav>
      </aside>
      <main id="main" className="main" tabIndex={-1}>
        <div className="content">{children}</div>
      </main>
    </div>
  );
}
