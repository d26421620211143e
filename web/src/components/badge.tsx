import type { ReactNode } from 'react';
import type { KeyView } from '../api.js';
import { OUTCOME_LABELS } from '../lib/format.js';

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
