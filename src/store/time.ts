/**
 * Both backends store and return times as `Date#toISOString()` strings, so values compare the same on SQLite
 * (as text) and PostgreSQL (as timestamptz), and the contract suite can compare rows across backends.
 */
export function toIso(value: string | Date): string {
  const d = typeof value === 'string' ? new Date(value) : value;
  if (Number.isNaN(d.getTime())) throw new RangeError(`invalid time: ${String(value)}`);
  return d.toISOString();
}

export function toIsoOrNull(value: string | Date | null | undefined): string | null {
  return value === null || value === undefined ? null : toIso(value);
}
