/**
 * The daily usage rollup's half of the store contract: over a seeded log, every series by day, breakdown, page
 * of top groups and split series the rollup answers equals the same read from the rows (sums exact, percentiles within the
 * histogram's 2 %), on ranges whole and cut mid-day, in every scope and filter the console sends; and it stays
 * equal through late rows, retention and the fill of days written before the rollup had them.
 */
import { beforeAll, expect, it } from 'vitest';
import { newId } from '../../src/ids.js';
import type { RequestLogRow } from '../../src/types.js';
import {
  BREAKDOWN_COLUMNS,
  SPLIT_COLUMNS,
  type BreakdownBy,
  type LogStore,
  type RequestFilter,
  type UsagePoint,
} from '../../src/store/types.js';
import { makeLogRow } from './log-rows.js';

export interface RollupContext {
  /** A store on the contract's database reading sums from the rollup whatever the range's size. */
  rolled(): LogStore;
  /** A store on the same database reading them from the rows alone. */
  rows(): LogStore;
}

const DAY = 86_400_000;
/** Days the seeded rows span: the 10th to the 14th of a month, at odd times of day. */
const START = Date.parse('2026-05-10T00:00:00.000Z');

/** A deterministic mix of every column the rollup keeps, and nulls where each may be null. */
export function seededRows(
  org: string,
  accounts: readonly string[],
  n: number,
  start = START,
): RequestLogRow[] {
  const rows: RequestLogRow[] = [];
  for (let i = 0; i < n; i++) {
    const at = start + Math.floor((i * 5 * DAY) / n) + (i % 7) * 1_013;
    const failed = i % 11 === 4;
    rows.push(
      makeLogRow({
        at,
        id: newId(at),
        org_id: org,
        account_id: accounts[i % accounts.length]!,
        key_id: `key-${i % 3}`,
        provider: i % 4 === 1 ? 'anthropic' : 'openai',
        model: i % 9 === 2 ? null : ['gpt-4o', 'gpt-4o-mini', 'claude-haiku-4-5'][i % 3]!,
        status: failed ? (i % 2 ? 500 : 429) : 200,
        outcome: failed ? 'upstream_error' : i % 13 === 6 ? 'client_aborted' : 'ok',
        latency_ms: i % 17 === 3 ? 0 : 40 + ((i * 7919) % 5000) + (i % 3) / 4,
        input_tokens: i % 10 === 5 ? null : 10 + ((i * 37) % 900),
        output_tokens: i % 8 === 1 ? null : (i * 53) % 400,
        cache_read_tokens: i % 4 === 0 ? (i * 11) % 100 : null,
        cost_usd: i % 12 === 5 ? null : ((i * 37) % 900) * 1.5e-7 + 1e-9,
        price_source:
          i % 12 === 5
            ? i % 24 === 5
              ? 'unpriced: no price'
              : 'not billed: refused'
            : i % 19 === 2
              ? 'partial: web_search has no price'
              : 'genai-prices@0.1.8',
        end_user: i % 6 === 0 ? null : `user-${i % 5}`,
        session: i % 5 === 0 ? null : `run-${Math.floor(i / 9) % 8}`,
        properties: {
          ...(i % 3 !== 0 && { feature: ['chat', 'agent', 'search'][(i % 4) % 3]! }),
          ...(i % 5 === 1 && { team: i % 2 ? 'growth' : '' }),
        },
        credential_fingerprint: i % 7 === 3 ? null : `fp-${i % 2}`,
      }),
    );
  }
  return rows;
}

type Numbers = Omit<UsagePoint, 'bucket' | 'latency_p50_ms' | 'latency_p95_ms'> & {
  latency_p50_ms?: number | null;
  latency_p95_ms?: number | null;
};

/** Each group's numbers: sums equal, cost to the last few digits, percentiles within the histogram's 2 %. */
export function expectSameUsage(
  rolled: Array<Numbers & { g: string }>,
  rows: Array<Numbers & { g: string }>,
): void {
  const byGroup = (xs: typeof rows) => new Map(xs.map((x) => [x.g, x]));
  const a = byGroup(rolled);
  const b = byGroup(rows);
  expect([...a.keys()].sort()).toEqual([...b.keys()].sort());
  for (const [g, x] of b) {
    const y = a.get(g)!;
    const { cost_usd: cx, latency_p50_ms: p50x, latency_p95_ms: p95x, ...sumsX } = x;
    const { cost_usd: cy, latency_p50_ms: p50y, latency_p95_ms: p95y, ...sumsY } = y;
    expect(sumsY).toEqual(sumsX);
    expect(cy).toBeCloseTo(cx, 12);
    for (const [exact, approx] of [
      [p50x, p50y],
      [p95x, p95y],
    ] as const) {
      if (exact === undefined) continue;
      if (exact === null || exact === 0) expect(approx ?? null).toBe(exact);
      else expect(Math.abs(approx! / exact - 1)).toBeLessThanOrEqual(0.021);
    }
  }
}

const breakdowns: BreakdownBy[] = [...BREAKDOWN_COLUMNS, { property: 'feature' }, { property: 'team' }];

/** Every read the rollup answers, on one filter, compared between the two stores. */
export async function expectSameReads(rolled: LogStore, rows: LogStore, f: RequestFilter): Promise<void> {
  const series = async (s: LogStore) => (await s.usageSeries(f, 'day')).map((p) => ({ ...p, g: p.bucket }));
  expectSameUsage(await series(rolled), await series(rows));
  for (const by of breakdowns) {
    const b = async (s: LogStore) => (await s.usageBreakdown(f, by)).map((r) => ({ ...r, g: r.group }));
    expectSameUsage(await b(rolled), await b(rows));
    // A page of the top groups: the same groups in the same order (ties by requests, then by name).
    for (const rank of ['requests', 'cost', 'tokens'] as const) {
      const top = async (s: LogStore) => {
        const t = await s.usageTop(f, by, rank, 3);
        return { total: t.total_groups, rows: t.rows.map((r) => ({ ...r, g: r.group })) };
      };
      const [x, y] = [await top(rolled), await top(rows)];
      expect(x.total).toBe(y.total);
      expect(x.rows.map((r) => r.g)).toEqual(y.rows.map((r) => r.g));
      expectSameUsage(x.rows, y.rows);
    }
  }
  for (const by of SPLIT_COLUMNS)
    for (const groups of [
      [],
      by === 'key_id' ? ['key-1'] : by === 'model' ? ['gpt-4o', ''] : ['user-1', 'run-2', 'fp-0', ''],
    ]) {
      const s = async (st: LogStore) =>
        (await st.usageSeriesSplit(f, 'day', by, groups)).map((p) => ({ ...p, g: `${p.bucket} ${p.group}` }));
      expectSameUsage(await s(rolled), await s(rows));
    }
}

export function describeUsageRollupContract(ctx: RollupContext): void {
  const org = `org-${newId()}`;
  const accounts = [`acct-${newId()}`, `acct-${newId()}`];
  let rolled: LogStore;
  let rows: LogStore;
  const seeded = seededRows(org, accounts, 700);

  beforeAll(async () => {
    rolled = ctx.rolled();
    rows = ctx.rows();
    expect(await rolled.insertBatch(seeded)).toEqual({ inserted: seeded.length, rejected: 0 });
    // A prune before (the log contract's retention runs on the same database) leaves the rollup covering only
    // the days after it: the fill adds these.
    while (await rolled.fillUsageRollup());
  });

  const iso = (t: number) => new Date(t).toISOString();
  const ranges: Array<Pick<RequestFilter, 'from' | 'to'>> = [
    {},
    { from: iso(START - DAY), to: iso(START + 6 * DAY) },
    { from: iso(START + DAY), to: iso(START + 4 * DAY) },
    { from: iso(START + 0.3 * DAY), to: iso(START + 3.55 * DAY) },
    { from: iso(START + 1.5 * DAY) },
    { to: iso(START + 2.25 * DAY) },
    { from: iso(START + 2.1 * DAY), to: iso(START + 2.6 * DAY) },
  ];

  it('answers series by day, breakdowns and split series as the rows do, over whole and cut ranges', async () => {
    for (const range of ranges) {
      await expectSameReads(rolled, rows, { org_id: org, ...range });
      await expectSameReads(rolled, rows, { account_id: accounts[0]!, ...range });
    }
  });

  it('in every scope and filter the console sends', async () => {
    const range = ranges[3]!;
    const filters: RequestFilter[] = [
      { org_id: org, account_id: accounts[1]! },
      { org_id: org, key_id: 'key-2' },
      { org_id: org, account_id: accounts[0]!, exclude_key_ids: ['key-0'] },
      { org_id: org, end_user: 'user-2' },
      { org_id: org, session: 'run-3' },
      { org_id: org, property: { name: 'feature', value: 'agent' } },
      // What the rollup does not keep reads the rows: the same answer either way.
      { org_id: org, model: 'gpt-4o' },
      { org_id: org, provider: 'anthropic', key_id: 'key-1' },
      { org_id: org, end_user: '' },
      { org_id: org, property: { name: 'team' } },
      { org_id: `org-${newId()}` },
    ];
    for (const f of filters) await expectSameReads(rolled, rows, { ...f, ...range });
  });

  it('reads the rollup: its percentiles are a bucket’s middle, not the rows’ latency', async () => {
    const f = { org_id: org, ...ranges[2]! };
    const exact = await rows.usageBreakdown(f, 'session');
    const approx = await rolled.usageBreakdown(f, 'session');
    const differs = approx.filter(
      (r) => r.latency_p50_ms !== exact.find((x) => x.group === r.group)?.latency_p50_ms,
    );
    expect(differs.length).toBeGreaterThan(0);
  });

  it('counts a row written late into a day it already holds, and what a batch repeats only once', async () => {
    const late = seededRows(org, accounts, 20, START + 2 * DAY).map((r) => ({
      ...r,
      latency_ms: r.latency_ms + 1,
    }));
    expect(await rolled.insertBatch(late)).toEqual({ inserted: 20, rejected: 0 });
    expect(await rolled.insertBatch([...late.slice(0, 5), ...seeded.slice(0, 5)])).toEqual({
      inserted: 0,
      rejected: 0,
    });
    for (const range of ranges.slice(0, 4)) await expectSameReads(rolled, rows, { org_id: org, ...range });
  });

  it('counts the rows of a batch a poison row made the store write one by one, and not the poison row', async () => {
    const batch = seededRows(org, accounts, 30, START + 3 * DAY);
    const poison = { ...batch[7]!, id: newId(START + 3 * DAY), method: null as never };
    expect(await rolled.insertBatch([...batch.slice(0, 10), poison, ...batch.slice(10)])).toEqual({
      inserted: 30,
      rejected: 1,
    });
    for (const range of ranges.slice(0, 4)) await expectSameReads(rolled, rows, { org_id: org, ...range });
  });
}

/**
 * Retention and the fill, on a store of its own: a prune that cuts into a day leaves every read equal to the
 * rows', before and after the fill adds back what is left of that day; so does a log written before the
 * rollup existed (`uncover` takes the rollup back to that: empty, covering from after the newest row), read
 * while the fill runs and once it is done.
 */
export function describeUsageRollupLifecycle(ctx: RollupContext & { uncover(): Promise<void> }): void {
  const org = `org-${newId()}`;
  const accounts = [`acct-${newId()}`];
  const f = { org_id: org };

  it('stays equal to the rows through a prune that cuts into a day, and the fill after it', async () => {
    const rolled = ctx.rolled();
    const rows = ctx.rows();
    await rolled.insertBatch(seededRows(org, accounts, 300));
    await rolled.prune(new Date(START + 1.4 * DAY).toISOString());
    await expectSameReads(rolled, rows, f);
    await expectSameReads(rolled, rows, { ...f, from: new Date(START).toISOString() });
    let days = 0;
    while (await rolled.fillUsageRollup()) days++;
    expect(days).toBe(1);
    await expectSameReads(rolled, rows, f);
  });

  it('answers from the rows for days written before it, and from itself once the fill has added them', async () => {
    const rolled = ctx.rolled();
    const rows = ctx.rows();
    await ctx.uncover();
    await expectSameReads(rolled, rows, f);
    expect(await rolled.fillUsageRollup()).toBe(true);
    await expectSameReads(rolled, rows, f);
    // Rows written while the fill runs, into days it has not reached and days it has.
    const more = seededRows(org, accounts, 200, START - 2 * DAY);
    await rolled.insertBatch(more.slice(0, 100));
    while (await rolled.fillUsageRollup());
    await rolled.insertBatch(more.slice(100));
    await expectSameReads(rolled, rows, f);
    await expectSameReads(rolled, rows, { ...f, from: new Date(START - DAY).toISOString() });
    expect(await rolled.fillUsageRollup()).toBe(false);
  });
}
