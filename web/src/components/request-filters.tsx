import { useEffect, useEffectEvent, useState } from 'react';
import type { KeyView } from '../api.js';
import { OUTCOME_LABELS, providerIds, providerLabel } from '../lib/format.js';
import { useSession } from '../session.js';
import { navigate } from '../router.js';
import { DateRange } from './date-range.js';

export const FILTER_KEYS = [
  'key_id',
  'provider',
  'model',
  'outcome',
  'status',
  'range',
  'from',
  'to',
  'property',
  'end_user',
  'session',
  'q',
  'end_user',
  'session',
] as const;
export type FilterKey = (typeof FILTER_KEYS)[number];
export type Filters = Partial<Record<FilterKey, string>>;

export const RANGES: Record<string, { label: string; ms: number }> = {
  '1h': { label: 'Last hour', ms: 3600_000 },
  '24h': { label: 'Last 24 hours', ms: 86_400_000 },
  '7d': { label: 'Last 7 days', ms: 7 * 86_400_000 },
  '30d': { label: 'Last 30 days', ms: 30 * 86_400_000 },
};

/**
 * What is wrong with a property filter as typed, or null when it is usable: `name` (rows that have it) or
 * `name:value`.
 */
export function propertyProblem(v: string | undefined): string | null {
  if (!v) return null;
  if (v.startsWith(':')) return 'Give the property name before the colon, e.g. team:search.';
  return null;
}

/** The longest search the server takes (its `q` limit). */
export const SEARCH_MAX_CHARS = 200;

/** What is wrong with a search as typed, or null when it can be sent. */
export function searchProblem(v: string | undefined): string | null {
  if (!v || v.length <= SEARCH_MAX_CHARS) return null;
  return `Search looks for up to ${SEARCH_MAX_CHARS} characters; this one has ${v.length}. Shorten it.`;
}

export function readFilters(query: URLSearchParams): Filters {
  const f: Filters = {};
  for (const k of FILTER_KEYS) {
    const v = query.get(k);
    if (v) f[k] = v;
  }
  return f;
}

export function writeFilters(f: Filters): void {
  const qs = new URLSearchParams();
  for (const k of FILTER_KEYS) if (f[k]) qs.set(k, f[k]);
  // The list's order is not a filter: it stays as the filters change.
  const sort = new URLSearchParams(window.location.search).get('sort');
  if (sort) qs.set('sort', sort);
  const s = qs.toString();
  navigate(s ? `/requests?${s}` : '/requests', { replace: true });
}

/** A text filter that updates the URL when typing pauses, not on every keystroke. */
function DebouncedInput({
  id,
  value,
  placeholder,
  onCommit,
  validate,
}: {
  id: string;
  value: string;
  placeholder: string;
  onCommit: (v: string) => void;
  /** A message when the text cannot be used as a filter: shown under the field, and nothing is sent. */
  validate?: (v: string) => string | null;
}) {
  const [text, setText] = useState(value);
  const [problem, setProblem] = useState<string | null>(() => validate?.(value) ?? null);
  // The latest validate/onCommit, without re-running the effects when a parent passes new functions.
  const showValue = useEffectEvent((v: string) => {
    setText(v);
    setProblem(validate?.(v) ?? null);
  });
  useEffect(() => showValue(value), [value]);
  const commit = (raw: string) => {
    const v = raw.trim();
    const p = validate?.(v) ?? null;
    setProblem(p);
    if (!p) onCommit(v);
  };
  const commitLater = useEffectEvent(commit);
  useEffect(() => {
    if (text === value) return;
    const t = setTimeout(() => commitLater(text), 450);
    return () => clearTimeout(t);
  }, [text, value]);
  return (
    <>
      <input
        id={id}
        value={text}
        placeholder={placeholder}
        aria-invalid={problem ? true : undefined}
        aria-describedby={problem ? `${id}-error` : undefined}
        onChange={(e) => setText(e.target.value)}
        onKeyDown={(e) => {
          if (e.key === 'Enter') commit(text);
        }}
      />
      {problem && (
        <span id={`${id}-error`} className="form-error small" role="alert">
          {problem}
        </span>
      )}
    </>
  );
}

/** The Key filter, shared by the request log and usage: every key of the account, by name and hint. */
export function KeySelect({
  id,
  keys,
  value,
  onChange,
}: {
  id: string;
  keys: KeyView[];
  value: string | undefined;
  onChange: (v: string | undefined) => void;
}) {
  return (
    <div className="field field-inline">
      <label htmlFor={id}>Key</label>
      <select id={id} value={value ?? ''} onChange={(e) => onChange(e.target.value || undefined)}>
        <option value="">All keys</option>
        {keys.map((k) => (
          <option key={k.id} value={k.id}>
            {k.name} ({k.hint})
          </option>
        ))}
      </select>
    </div>
  );
}

/** The Provider filter, shared by the request log and usage. */
export function ProviderSelect({
  id,
  value,
  onChange,
}: {
  id: string;
  value: string | undefined;
  onChange: (v: string | undefined) => void;
}) {
  const { info } = useSession();
  return (
    <div className="field field-inline">
      <label htmlFor={id}>Provider</label>
      <select id={id} value={value ?? ''} onChange={(e) => onChange(e.target.value || undefined)}>
        <option value="">All providers</option>
        {providerIds(info).map((pid) => (
          <option key={pid} value={pid}>
            {providerLabel(pid)}
          </option>
        ))}
      </select>
    </div>
  );
}

export function RequestFilters({ filters, keys }: { filters: Filters; keys: KeyView[] }) {
  const set = (k: FilterKey, v: string): void => writeFilters({ ...filters, [k]: v || undefined });
  const statusValue = filters.outcome
    ? `outcome:${filters.outcome}`
    : filters.status
      ? `status:${filters.status}`
      : '';
  const active = FILTER_KEYS.some((k) => filters[k]);
  return (
    <div className="filters" role="search" aria-label="Filter requests">
      <div className="field field-inline field-search">
        <label htmlFor="f-q">
          Search <span className="muted">· all words match; OR for either</span>
        </label>
        <DebouncedInput
          id="f-q"
          value={filters.q ?? ''}
          placeholder="model, path, user, session, text…"
          onCommit={(v) => set('q', v)}
          validate={searchProblem}
        />
      </div>
      <div className="field field-inline">
        <label htmlFor="f-range">Time</label>
        <select
          id="f-range"
          value={filters.range ?? ''}
          onChange={(e) =>
            writeFilters({
              ...filters,
              range: e.target.value || undefined,
              // A custom range starts as the last 24 hours; the inputs below change it.
              from: e.target.value === 'custom' ? new Date(Date.now() - 86_400_000).toISOString() : undefined,
              to: e.target.value === 'custom' ? new Date().toISOString() : undefined,
            })
          }
        >
          <option value="">All time</option>
          {Object.entries(RANGES).map(([id, r]) => (
            <option key={id} value={id}>
              {r.label}
            </option>
          ))}
          <option value="custom">Custom range…</option>
        </select>
      </div>
      <KeySelect id="f-key" keys={keys} value={filters.key_id} onChange={(v) => set('key_id', v ?? '')} />
      <ProviderSelect id="f-provider" value={filters.provider} onChange={(v) => set('provider', v ?? '')} />
      <div className="field field-inline">
        <label htmlFor="f-status">Status</label>
        <select
          id="f-status"
          value={statusValue}
          onChange={(e) => {
            const [kind, v] = e.target.value.split(':');
            writeFilters({
              ...filters,
              outcome: kind === 'outcome' ? v : undefined,
              status: kind === 'status' ? v : undefined,
            });
          }}
        >
          <option value="">Any status</option>
          <optgroup label="Outcome">
            {Object.entries(OUTCOME_LABELS).map(([id, label]) => (
              <option key={id} value={`outcome:${id}`}>
                {label}
              </option>
            ))}
          </optgroup>
          <optgroup label="HTTP status">
            {['200', '400', '401', '403', '404', '429', '500', '502', '503', '504', '529'].map((s) => (
              <option key={s} value={`status:${s}`}>
                {s}
              </option>
            ))}
          </optgroup>
        </select>
      </div>
      <div className="field field-inline">
        <label htmlFor="f-model">Model</label>
        <DebouncedInput
          id="f-model"
          value={filters.model ?? ''}
          placeholder="e.g. claude or gpt-4o"
          onCommit={(v) => set('model', v)}
        />
      </div>
      <div className="field field-inline">
        <label htmlFor="f-property">Property</label>
        <DebouncedInput
          id="f-property"
          value={filters.property ?? ''}
          placeholder="name or name:value"
          onCommit={(v) => set('property', v)}
          validate={propertyProblem}
        />
      </div>
      {(['end_user', 'session'] as const).map(
        (k) =>
          filters[k] && (
            <button
              key={k}
              type="button"
              className="btn btn-secondary btn-sm filter-chip"
              title="Remove this filter"
              aria-label={`Remove the ${k === 'end_user' ? 'end user' : 'session'} filter`}
              onClick={() => set(k, '')}
            >
              {k === 'end_user' ? 'End user' : 'Session'}:{' '}
              <span className="filter-chip-value">{filters[k]}</span> <span aria-hidden="true">×</span>
            </button>
          ),
      )}
      {active && (
        <button type="button" className="btn btn-ghost btn-sm filters-clear" onClick={() => writeFilters({})}>
          Clear filters
        </button>
      )}
      {filters.range === 'custom' && (
        <DateRange
          idPrefix="f-range"
          from={filters.from}
          to={filters.to}
          onApply={(from, to) => writeFilters({ ...filters, from, to })}
        />
      )}
    </div>
  );
}
