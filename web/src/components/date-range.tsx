/**
 * A custom time range: two local date-times, applied together. Shared by Requests and Usage, which keep
 * it in the URL as ISO `from` / `to`.
 */
import { useEffect, useState } from 'react';

/** ISO → the value a datetime-local input shows (local time, minutes). */
function toLocalInput(iso: string | undefined): string {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '';
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

export function DateRange({
  idPrefix,
  from,
  to,
  onApply,
}: {
  idPrefix: string;
  from: string | undefined;
  to: string | undefined;
  onApply: (from: string, to: string) => void;
}) {
  const [start, setStart] = useState(() =>
    toLocalInput(from ?? new Date(Date.now() - 86_400_000).toISOString()),
  );
  const [end, setEnd] = useState(() => toLocalInput(to ?? new Date().toISOString()));
  const [problem, setProblem] = useState<string | null>(null);
  useEffect(() => {
    if (from) setStart(toLocalInput(from));
    if (to) setEnd(toLocalInput(to));
  }, [from, to]);

  function apply(): void {
    const a = new Date(start);
    const b = new Date(end);
    if (Number.isNaN(a.getTime()) || Number.isNaN(b.getTime()))
      return setProblem('Give both a start and an end.');
    if (a >= b) return setProblem('The start must be before the end.');
    setProblem(null);
    onApply(a.toISOString(), b.toISOString());
  }

  return (
    <div className="date-range" role="group" aria-label="Custom time range">
      <div className="field field-inline">
        <label htmlFor={`${idPrefix}-from`}>From</label>
        <input
          id={`${idPrefix}-from`}
          type="datetime-local"
          value={start}
          onChange={(e) => setStart(e.target.value)}
        />
      </div>
      <div className="field field-inline">
        <label htmlFor={`${idPrefix}-to`}>To</label>
        <input
          id={`${idPrefix}-to`}
          type="datetime-local"
          value={end}
          onChange={(e) => setEnd(e.target.value)}
        />
      </div>
      <button type="button" className="btn btn-secondary btn-sm date-range-apply" onClick={apply}>
        Apply range
      </button>
      {problem && (
        <span className="form-error small" role="alert">
          {problem}
        </span>
      )}
    </div>
  );
}
