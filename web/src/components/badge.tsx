import type { ReactNode } from 'react';
import type { KeyView } from '../api.js';
import { OUTCOME_LABELS } from '../lib/format.js';
import { ERROR_CODE_LABELS } from '../lib/limits.js';

type Tone = 'green' | 'red' | 'amber' | 'gray' | 'blue';

export function Badge({ tone, children }: { tone: Tone; children: ReactNode }) {
  return <span className={`badge badge-${tone}`}>{children}</span>;
}

export function KeyStatusBadge({ status }: { status: KeyView['status'] }) {
  const tone: Tone = status === 'active' ? 'green' : status === 'revoked' ? 'red' : 'gray';
  return <Badge tone={tone}>{status[0]!.toUpperCase() + status.slice(1)}</Badge>;
}

export function StatusBadge({ status, outcome }: { status: number; outcome: string }) {
  const tone: Tone =
    outcome === 'ok' && status < 400
      ? 'green'
      : outcome === 'client_aborted'
        ? 'amber'
        : status === 0
          ? 'gray'
          : 'red';
  const text = status === 0 ? (OUTCOME_LABELS[outcome] ?? outcome) : String(status);
  const title = OUTCOME_LABELS[outcome] ?? outcome;
  return (
    <span title={title}>
      <Badge tone={tone}>{text}</Badge>
    </span>
  );
}

/** keyrelay's own error code (e.g. proxy_rate_limited) as a short label; the code itself is the tooltip. */
export function ErrorCodeBadge({ code }: { code: string | null }) {
  if (!code) return null;
  const tone: Tone = code === 'proxy_rate_limited' || code === 'proxy_budget_exceeded' ? 'amber' : 'red';
  return (
    <span className="error-code-badge" title={code} data-error-code={code}>
      <Badge tone={tone}>{ERROR_CODE_LABELS[code] ?? code.replace(/^proxy_/, '').replace(/_/g, ' ')}</Badge>
    </span>
  );
}
