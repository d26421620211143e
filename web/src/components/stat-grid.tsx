import type { ReactNode } from 'react';

/** A row of labelled figures (a view's totals), as the overview shows its last day. */
export function StatGrid({
  label,
  items,
}: {
  label: string;
  items: { label: string; value: ReactNode; note?: ReactNode }[];
}) {
  return (
    <div className="stat-grid" role="group" aria-label={label}>
      {items.map((i) => (
        <div key={i.label} className="card stat" data-stat={i.label}>
          <span className="stat-label">{i.label}</span>
          <span className="stat-value">{i.value}</span>
          {i.note && <span className="stat-note">{i.note}</span>}
        </div>
      ))}
    </div>
  );
}
