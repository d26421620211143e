import { useMemo } from 'react';
import { api, type BreakdownBy, type KeyView, type UsageSplitPoint } from '../api.js';
import { ATTRIBUTION_TITLES, AttributionBreakdown, Breakdown, RANKS } from '../components/breakdown.js';
import { CostChart, LatencyChart, RequestsChart, SplitChart, TokensChart } from '../components/charts.js';
import { DateRange } from '../components/date-range.js';
import { PageHeader } from '../components/page-header.js';
import { KeySelect, ProviderSelect } from '../components/request-filters.js';
import { EmptyState, ErrorState, LoadingState } from '../components/states.js';
import { BatchesPanel } from '../components/batches-panel.js';
import { Tabs } from '../components/tabs.js';
import { bucketFor, fillBuckets, splitRows, USAGE_RANGES, type UsageRange } from '../lib/buckets.js';
import { formatCost, formatNumber } from '../lib/format.js';
import { useAsync } from '../lib/use-async.js';
import { Link, navigate, useLocation } from '../router.js';

/** The usage page's range and filters, all in the URL. */
function readUsageQuery(query: URLSearchParams) {
  const preset = query.get('range') ?? '24h';
  const from = query.get('from') ?? undefined;
  const to = query.get('to') ?? undefined;
  const custom = preset === 'custom' && from && to && Date.parse(from) < Date.parse(to);
  const rangeId: UsageRange | 'custom' = custom
    ? 'custom'
    : preset in USAGE_RANGES
      ? (preset as UsageRange)
      : '24h';
  return {
    rangeId,
    from: custom ? from : undefined,
    to: custom ? to : undefined,
    key_id: query.get('key_id') ?? undefined,
    provider: query.get('provider') ?? undefined,
    model: query.get('model') ?? undefined,
    by: readBy(query.get('by')),
    rank: RANKS.find((r) => r === query.get('rank')) ?? 'requests',
    split: SPLITS.find((v) => v === query.get('split')),
  };
}

/** What the charts can be split by (the `split` parameter), and how each is named. */
const SPLITS = ['end_user', 'session', 'credential_fingerprint'] as const;
type Split = (typeof SPLITS)[number];
const SPLIT_LABELS: Record<Split, string> = {
  end_user: 'end user',
  session: 'session',
  credential_fingerprint: 'provider credential',
};
/** Groups a split chart names; the rest are one "Other". */
const SPLIT_TOP = 5;

/** Rows the attribution breakdown shows: the top of the ranking. */
const ATTRIBUTION_ROWS = 100;

function readBy(v: string | null): BreakdownBy {
  if (v && v in ATTRIBUTION_TITLES) return v as BreakdownBy;
  if (v?.startsWith('property:') && v.length > 9 && v.length <= 73) return v as BreakdownBy;
  return 'end_user';
}
type UsageQueryState = ReturnType<typeof readUsageQuery>;

function writeUsageQuery(q: UsageQueryState): void {
  const qs = new URLSearchParams();
  qs.set('range', q.rangeId);
  for (const k of ['from', 'to', 'key_id', 'provider', 'model'] as const) {
    const v = q[k];
    if (v && (q.rangeId === 'custom' || (k !== 'from' && k !== 'to'))) qs.set(k, v);
  }
  if (q.by !== 'end_user') qs.set('by', q.by);
  if (q.rank !== 'requests') qs.set('rank', q.rank);
  if (q.split) qs.set('split', q.split);
  navigate(`/usage?${qs.toString()}`, { replace: true });
}

function UsageFilters({ q, keys }: { q: UsageQueryState; keys: KeyView[] }) {
  const set = (patch: Partial<UsageQueryState>) => writeUsageQuery({ ...q, ...patch });
  return (
    <div className="filters usage-filters" role="search" aria-label="Filter usage">
      <KeySelect id="u-key" keys={keys} value={q.key_id} onChange={(v) => set({ key_id: v })} />
      <ProviderSelect id="u-provider" value={q.provider} onChange={(v) => set({ provider: v })} />
      <div className="field field-inline">
        <label htmlFor="u-model">Model</label>
        <input
          id="u-model"
          defaultValue={q.model ?? ''}
          key={q.model ?? ''}
          placeholder="e.g. claude or gpt-5-mini"
          onKeyDown={(e) => {
            if (e.key === 'Enter') set({ model: e.currentTarget.value.trim() || undefined });
          }}
          onBlur={(e) => {
            if ((e.target.value.trim() || undefined) !== q.model)
              set({ model: e.target.value.trim() || undefined });
          }}
        />
      </div>
      <div className="field field-inline">
        <label htmlFor="u-split">Split charts by</label>
        <select
          id="u-split"
          value={q.split ?? ''}
          onChange={(e) => set({ split: SPLITS.find((v) => v === e.target.value) })}
        >
          <option value="">Nothing</option>
          <option value="end_user">End user</option>
          <option value="session">Session</option>
          <option value="credential_fingerprint">Provider credential</option>
        </select>
      </div>
      {(q.key_id || q.provider || q.model) && (
        <button
          type="button"
          className="btn btn-ghost btn-sm filters-clear"
          onClick={() => set({ key_id: undefined, provider: undefined, model: undefined })}
        >
          Clear filters
        </button>
      )}
      {q.rangeId === 'custom' && (
        <DateRange
          idPrefix="u-range"
          from={q.from}
          to={q.to}
          onApply={(from, to) => set({ rangeId: 'custom', from, to })}
        />
      )}
    </div>
  );
}

export function UsagePage() {
  const { query, search } = useLocation();
  const q = readUsageQuery(query);
  const keysList = useAsync(() => api.listKeys(), []);

  const data = useAsync(async () => {
    const preset = q.rangeId === 'custom' ? null : USAGE_RANGES[q.rangeId];
    const to = q.to ? Date.parse(q.to) : Date.now();
    const from = q.from ? Date.parse(q.from) : to - preset!.ms;
    const bucket = preset ? preset.bucket : bucketFor(to - from);
    const filters = { key_id: q.key_id, provider: q.provider, model: q.model };
    const range = { from: new Date(from).toISOString(), to: new Date(to).toISOString(), ...filters };
    const [series, byModel, byKey, byWho, keys, split] = await Promise.all([
      api.usageSeries({ ...range, bucket }),
      api.usageBreakdown({ ...range, by: 'model' }),
      api.usageBreakdown({ ...range, by: 'key_id' }),
      api.usageBreakdown({ ...range, by: q.by, rank: q.rank, limit: ATTRIBUTION_ROWS }),
      api.listKeys(),
      q.split
        ? api.usageSeriesSplit({ ...range, bucket, split_by: q.split, top: SPLIT_TOP, rank: 'cost' })
        : null,
    ]);
    return {
      split,
      from,
      to,
      bucket,
      points: series.points,
      byModel: byModel.rows,
      byKey: byKey.rows,
      byWho: byWho.rows,
      whoGroups: byWho.total_groups,
      keys: keys.keys,
    };
  }, [search]);
  const range = {
    bucket: data.data?.bucket ?? 'hour',
    ms: data.data ? data.data.to - data.data.from : 86_400_000,
  };
  const rangeId = q.rangeId;
  // Links into the request log keep this page's range and filters.
  const requestsLink = (extra: Record<string, string>) => {
    const qs = new URLSearchParams();
    if (data.data) {
      qs.set('from', new Date(data.data.from).toISOString());
      qs.set('to', new Date(data.data.to).toISOString());
      qs.set('range', 'custom');
    }
    if (q.provider) qs.set('provider', q.provider);
    if (q.key_id) qs.set('key_id', q.key_id);
    if (q.model) qs.set('model', q.model);
    for (const [k, v] of Object.entries(extra)) qs.set(k, v);
    return `/requests?${qs.toString()}`;
  };

  const chart = useMemo(
    () => (data.data ? fillBuckets(data.data.points, data.data.from, data.data.to, range.bucket) : []),
    [data.data, range.bucket],
  );
  const keyLabel = useMemo(() => {
    const m = new Map((data.data?.keys ?? []).map((k) => [k.id, k.name]));
    return (id: string) => m.get(id) ?? id;
  }, [data.data]);

  const props = { data: chart, bucket: range.bucket, rangeMs: range.ms };
  const split = useMemo(() => {
    const d = data.data;
    if (!d?.split) return null;
    const sp = d.split;
    const names = sp.groups.map((g) => g.group);
    const label = (g: string) =>
      g === '' ? '(none)' : q.split === 'credential_fingerprint' ? `${g.slice(0, 10)}…` : g;
    const groups = [
      ...names.map((n, i) => ({ key: `g${i}`, label: label(n) })),
      ...(sp.total_groups > names.length ? [{ key: 'other', label: 'Other' }] : []),
    ];
    const rows = (value: (p: UsageSplitPoint) => number) => ({
      groups,
      data: splitRows(sp.points, names, value, d.from, d.to, d.bucket),
    });
    return { cost: rows((p) => p.cost_usd), requests: rows((p) => p.requests), total: sp.total_groups };
  }, [data.data, q.split]);
  const empty = data.data && data.data.points.every((p) => p.requests === 0);

  return (
    <>
      <PageHeader
        title="Usage"
        description="Requests, tokens, cost and latency across all your keys."
        actions={
          <Tabs
            idPrefix="range"
            size="sm"
            label="Time range"
            value={rangeId}
            onChange={(id) =>
              writeUsageQuery({
                ...q,
                rangeId: id as UsageQueryState['rangeId'],
                // Custom starts from what is on screen, so the inputs open on a sensible range.
                from: id === 'custom' && data.data ? new Date(data.data.from).toISOString() : undefined,
                to: id === 'custom' && data.data ? new Date(data.data.to).toISOString() : undefined,
              })
            }
            items={[
              ...Object.entries(USAGE_RANGES).map(([id, r]) => ({ id, label: r.label })),
              { id: 'custom', label: 'Custom' },
            ]}
          />
        }
      />
      <UsageFilters q={q} keys={keysList.data?.keys ?? []} />
      <div id="range-panel" role="tabpanel" aria-labelledby={`range-tab-${rangeId}`}>
        {data.error ? (
          <ErrorState error={data.error} onRetry={data.reload} />
        ) : !data.data ? (
          <LoadingState label="Loading usage…" />
        ) : (
          <>
            {empty && (
              <EmptyState title="No traffic in this range">
                Pick a longer range, or <Link to="/">make your first call</Link>.
              </EmptyState>
            )}
            {split && q.split && (
              <section className="split-charts" aria-label={`Usage by ${SPLIT_LABELS[q.split]}`}>
                <div className="chart-grid">
                  <SplitChart
                    title={`Cost by ${SPLIT_LABELS[q.split]}`}
                    series={split.cost}
                    format={formatCost}
                    bucket={range.bucket}
                    rangeMs={range.ms}
                  />
                  <SplitChart
                    title={`Requests by ${SPLIT_LABELS[q.split]}`}
                    series={split.requests}
                    format={formatNumber}
                    bucket={range.bucket}
                    rangeMs={range.ms}
                  />
                </div>
                {split.total > SPLIT_TOP && (
                  <p className="muted small">
                    The {SPLIT_TOP} costliest of {formatNumber(split.total)}; the rest as Other.
                  </p>
                )}
              </section>
            )}
            <div className="chart-grid">
              <RequestsChart {...props} />
              <TokensChart {...props} />
              <CostChart {...props} />
              <LatencyChart {...props} />
            </div>
            <div className="breakdown-grid">
              <Breakdown
                title="By model"
                rows={data.data.byModel}
                label={(g) => g || '(no model)'}
                linkFor={(g) => (g ? requestsLink({ model: `"${g}"` }) : null)}
              />
              <Breakdown
                title="By key"
                rows={data.data.byKey}
                label={keyLabel}
                linkFor={(g) => requestsLink({ key_id: g })}
              />
            </div>
            <AttributionBreakdown
              by={q.by}
              rank={q.rank}
              rows={data.data.byWho}
              totalGroups={data.data.whoGroups}
              onBy={(by) => writeUsageQuery({ ...q, by })}
              onRank={(rank) => writeUsageQuery({ ...q, rank })}
              requestsLink={requestsLink}
            />
          </>
        )}
      </div>
      <BatchesPanel keyLabel={keyLabel} />
    </>
  );
}
