import { useSyncExternalStore, type ReactElement, type ReactNode } from 'react';
import {
  Area,
  AreaChart,
  Bar,
  BarChart,
  CartesianGrid,
  Legend,
  Line,
  LineChart,
  ResponsiveContainer,
  Tooltip,
  XAxis,
  YAxis,
} from 'recharts';
import { formatTick, type Bucket, type ChartPoint } from '../lib/buckets.js';
import { formatCompact, formatCost, formatMs } from '../lib/format.js';

const dark = window.matchMedia('(prefers-color-scheme: dark)');

function useDark(): boolean {
  return useSyncExternalStore(
    (cb) => {
      dark.addEventListener('change', cb);
      return () => dark.removeEventListener('change', cb);
    },
    () => dark.matches,
  );
}

/** SVG attributes can't read CSS variables reliably, so the chart palette follows the colour scheme here. */
export function usePalette() {
  const isDark = useDark();
  return isDark
    ? {
        a: '#8b8dfc',
        b: '#3fb9a5',
        c: '#f0a34a',
        d: '#f76b6b',
        grid: '#2a2d36',
        text: '#8b90a0',
        tipBg: '#16181e',
        tipBorder: '#2a2d36',
      }
    : {
        a: '#5b5bd6',
        b: '#12a594',
        c: '#e5850f',
        d: '#e5484d',
        grid: '#ececf0',
        text: '#80838d',
        tipBg: '#ffffff',
        tipBorder: '#e4e4e9',
      };
}

interface ChartProps {
  data: ChartPoint[];
  bucket: Bucket;
  rangeMs: number;
}

function ChartCard({
  title,
  summary,
  children,
}: {
  title: string;
  summary?: ReactNode;
  children: ReactNode;
}) {
  return (
    <section className="card chart-card" aria-label={title}>
      <div className="chart-head">
        <h2>{title}</h2>
        {summary && <span className="chart-summary">{summary}</span>}
      </div>
      <div className="chart-body">
        <ResponsiveContainer width="100%" height="100%">
          {children as ReactElement}
        </ResponsiveContainer>
      </div>
    </section>
  );
}

/** One width for every chart's value axis, so their time axes line up when the charts sit side by side. */
const Y_AXIS_WIDTH = 64;

function useAxes({ bucket, rangeMs }: { bucket: Bucket; rangeMs: number }) {
  const p = usePalette();
  const tick = { fill: p.text, fontSize: 11 };
  return {
    p,
    grid: <CartesianGrid stroke={p.grid} vertical={false} />,
    x: (
      <XAxis
        dataKey="t"
        type="number"
        scale="time"
        domain={['dataMin', 'dataMax']}
        tickFormatter={(t: number) => formatTick(t, bucket, rangeMs)}
        tick={tick}
        tickLine={false}
        axisLine={{ stroke: p.grid }}
        minTickGap={28}
      />
    ),
    y: (fmt: (v: number) => string) => (
      <YAxis
        tick={tick}
        tickLine={false}
        axisLine={false}
        width={Y_AXIS_WIDTH}
        tickFormatter={fmt}
        allowDecimals={false}
      />
    ),
    tooltip: (fmt: (v: number) => string) => (
      <Tooltip
        labelFormatter={(t) =>
          new Date(Number(t)).toLocaleString('en-US', {
            month: 'short',
            day: 'numeric',
            hour: '2-digit',
            minute: '2-digit',
            hour12: false,
          })
        }
        formatter={(v) => fmt(Number(v))}
        contentStyle={{
          background: p.tipBg,
          border: `1px solid ${p.tipBorder}`,
          borderRadius: 8,
          fontSize: 12,
        }}
        cursor={{ fill: p.grid, opacity: 0.5 }}
      />
    ),
  };
}

function formatCostTick(v: number): string {
  if (v === 0) return '$0';
  return `$${Number(v.toPrecision(2))}`;
}

const sum = (d: ChartPoint[], f: (p: ChartPoint) => number): number => d.reduce((s, p) => s + f(p), 0);

export function RequestsChart(props: ChartProps) {
  const { p, grid, x, y, tooltip } = useAxes(props);
  const total = sum(props.data, (d) => d.requests);
  const errors = sum(props.data, (d) => d.errors);
  const data = props.data.map((d) => ({ ...d, ok: d.requests - d.errors }));
  return (
    <ChartCard title="Requests" summary={`${formatCompact(total)} total · ${formatCompact(errors)} errors`}>
      <BarChart data={data} margin={{ top: 8, right: 8, left: 0, bottom: 0 }}>
        {grid}
        {x}
        {y(formatCompact)}
        {tooltip((v) => v.toLocaleString('en-US'))}
        <Legend iconType="circle" iconSize={8} wrapperStyle={{ fontSize: 12 }} />
        <Bar dataKey="ok" name="OK" stackId="r" fill={p.a} isAnimationActive={false} />
        <Bar
          dataKey="errors"
          name="Errors"
          stackId="r"
          fill={p.d}
          radius={[3, 3, 0, 0]}
          isAnimationActive={false}
        />
      </BarChart>
    </ChartCard>
  );
}

export function TokensChart(props: ChartProps) {
  const { p, grid, x, y, tooltip } = useAxes(props);
  const tin = sum(props.data, (d) => d.input_tokens);
  const tout = sum(props.data, (d) => d.output_tokens);
  return (
    <ChartCard title="Tokens" summary={`${formatCompact(tin)} in · ${formatCompact(tout)} out`}>
      <AreaChart data={props.data} margin={{ top: 8, right: 8, left: 0, bottom: 0 }}>
        {grid}
        {x}
        {y(formatCompact)}
        {tooltip((v) => v.toLocaleString('en-US'))}
        <Legend iconType="circle" iconSize={8} wrapperStyle={{ fontSize: 12 }} />
        <Area
          dataKey="input_tokens"
          name="Input"
          stackId="t"
          stroke={p.a}
          fill={p.a}
          fillOpacity={0.25}
          isAnimationActive={false}
        />
        <Area
          dataKey="output_tokens"
          name="Output"
          stackId="t"
          stroke={p.b}
          fill={p.b}
          fillOpacity={0.25}
          isAnimationActive={false}
        />
      </AreaChart>
    </ChartCard>
  );
}

export function CostChart(props: ChartProps) {
  const { p, grid, x, tooltip } = useAxes(props);
  const cost = sum(props.data, (d) => d.cost_usd);
  const unknown = sum(props.data, (d) => d.unknown_cost_requests);
  const partial = sum(props.data, (d) => d.partial_cost_requests);
  const total = sum(props.data, (d) => d.requests);
  const summary =
    unknown > 0 && unknown === total
      ? 'unknown (no prices)'
      : [formatCost(cost), unknown > 0 ? `${unknown} unpriced` : '', partial > 0 ? `${partial} partial` : '']
          .filter(Boolean)
          .join(' · ');
  return (
    <ChartCard title="Cost" summary={summary}>
      <AreaChart data={props.data} margin={{ top: 8, right: 8, left: 0, bottom: 0 }}>
        {grid}
        {x}
        <YAxis
          tick={{ fill: p.text, fontSize: 11 }}
          tickLine={false}
          axisLine={false}
          width={Y_AXIS_WIDTH}
          tickFormatter={formatCostTick}
        />
        {tooltip(formatCost)}
        <Area
          dataKey="cost_usd"
          name="Cost (known prices)"
          stroke={p.c}
          fill={p.c}
          fillOpacity={0.2}
          isAnimationActive={false}
        />
      </AreaChart>
    </ChartCard>
  );
}

export function LatencyChart(props: ChartProps) {
  const { p, grid, x, y, tooltip } = useAxes(props);
  const p95s = props.data.map((d) => d.latency_p95_ms).filter((v): v is number => v !== null);
  const worst = p95s.length ? Math.max(...p95s) : null;
  return (
    <ChartCard title="Latency" summary={worst !== null ? `worst p95 ${formatMs(worst)}` : undefined}>
      <LineChart data={props.data} margin={{ top: 8, right: 8, left: 0, bottom: 0 }}>
        {grid}
        {x}
        {y((v) => formatMs(v).replace(' ', ''))}
        {tooltip(formatMs)}
        <Legend iconType="circle" iconSize={8} wrapperStyle={{ fontSize: 12 }} />
        <Line
          dataKey="latency_p50_ms"
          name="p50"
          stroke={p.a}
          strokeWidth={2}
          dot={{ r: 2.5, strokeWidth: 0, fill: p.a }}
          connectNulls
          isAnimationActive={false}
        />
        <Line
          dataKey="latency_p95_ms"
          name="p95"
          stroke={p.c}
          strokeWidth={2}
          dot={{ r: 2.5, strokeWidth: 0, fill: p.c }}
          connectNulls
          isAnimationActive={false}
        />
      </LineChart>
    </ChartCard>
  );
}

/** Colours of a split chart's groups after the palette's four; "other" is always grey. */
const MORE_COLOURS = ['#8e4ec6', '#0090ff', '#d6409f', '#978365', '#30a46c', '#ad7f58'];
const OTHER_COLOUR = '#9ca3af';

export interface SplitSeries {
  /** One row per bucket: `t` and a value per group key (g0, g1, … and `other`). */
  data: ({ t: number } & Record<string, number>)[];
  groups: { key: string; label: string }[];
}

/** One measure of a split series as stacked bars: each named group, then every other one as "Other". */
export function SplitChart({
  title,
  series,
  format,
  bucket,
  rangeMs,
}: {
  title: string;
  series: SplitSeries;
  format: (v: number) => string;
  bucket: Bucket;
  rangeMs: number;
}) {
  const { p, grid, x, tooltip } = useAxes({ bucket, rangeMs });
  const colours = [p.a, p.b, p.c, p.d, ...MORE_COLOURS];
  const total = series.data.reduce((s, d) => s + series.groups.reduce((n, g) => n + (d[g.key] ?? 0), 0), 0);
  return (
    <ChartCard title={title} summary={format(total)}>
      <BarChart data={series.data} margin={{ top: 8, right: 8, left: 0, bottom: 0 }}>
        {grid}
        {x}
        <YAxis
          tick={{ fill: p.text, fontSize: 11 }}
          tickLine={false}
          axisLine={false}
          width={Y_AXIS_WIDTH}
          tickFormatter={format === formatCost ? formatCostTick : formatCompact}
        />
        {tooltip(format)}
        <Legend iconType="circle" iconSize={8} wrapperStyle={{ fontSize: 12 }} />
        {series.groups.map((g, i) => (
          <Bar
            key={g.key}
            dataKey={g.key}
            name={g.label}
            stackId="s"
            fill={g.key === 'other' ? OTHER_COLOUR : colours[i % colours.length]}
            isAnimationActive={false}
          />
        ))}
      </BarChart>
    </ChartCard>
  );
}
