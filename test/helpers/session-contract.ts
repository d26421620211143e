/**
 * LogStore's sessions and split series, part of the store contract (test/store-contract.test.ts runs it on
 * each backend): every sum checked against the rows it was computed from.
 */
import { beforeEach, expect, it } from 'vitest';
import { newId } from '../../src/ids.js';
import type { RequestLogRow } from '../../src/types.js';
import type { LogStore, RequestFilter, SessionSummary } from '../../src/store/types.js';
import { makeLogRow, toSummary } from './log-rows.js';
import type { LogContext } from './log-contract.js';

const T0 = Date.parse('2026-03-02T10:00:00.000Z');
const MIN = 60_000;
const HOUR = 3_600_000;

/** The summary a session's rows should add up to, computed here from the rows themselves. */
function expected(session: string, rows: RequestLogRow[]): SessionSummary {
  const mine = rows.filter((r) => r.session === session);
  const starts = mine.map((r) => Date.parse(r.created_at));
  const start = Math.min(...starts);
  const duration = Math.round(Math.max(...mine.map((r) => Date.parse(r.created_at) + r.latency_ms)) - start);
  const sum = (f: (r: RequestLogRow) => number) => mine.reduce((s, r) => s + f(r), 0);
  const distinct = (f: (r: RequestLogRow) => string | null) =>
    [...new Set(mine.map(f).filter((v): v is string => v !== null))].sort();
  return {
    session,
    started_at: new Date(start).toISOString(),
    ended_at: new Date(start + duration).toISOString(),
    duration_ms: duration,
    requests: mine.length,
    errors: mine.filter((r) => r.status >= 400 || r.outcome !== 'ok').length,
    input_tokens: sum((r) => r.input_tokens ?? 0),
    output_tokens: sum((r) => r.output_tokens ?? 0),
    cache_read_tokens: sum((r) => r.cache_read_tokens ?? 0),
    cost_usd: sum((r) => r.cost_usd ?? 0),
    unknown_cost_requests: mine.filter((r) => r.cost_usd === null).length,
    partial_cost_requests: 0,
    models: distinct((r) => r.model),
    end_users: distinct((r) => r.end_user),
  };
}

async function allSessions(log: LogStore, f: RequestFilter, limit: number): Promise<SessionSummary[][]> {
  const pages: SessionSummary[][] = [];
  let cursor: string | null = null;
  do {
    const page = await log.listSessions(f, { limit, cursor });
    pages.push(page.items);
    cursor = page.next_cursor;
  } while (cursor && pages.length < 50);
  return pages;
}

export function describeSessionContract(ctx: LogContext): void {
  let log: LogStore;
  let org: string;
  let rows: RequestLogRow[];
  beforeEach(async () => {
    log = ctx.store();
    org = `org-${newId()}`;
    const row = (over: Partial<RequestLogRow> & { at: number }) =>
      makeLogRow({ org_id: org, account_id: 'acct-a', ...over });
    rows = [
      // An agent run: three calls, two models, one failed, one unpriced, latencies with fractions.
      row({
        at: T0,
        session: 'run-1',
        end_user: 'alice',
        model: 'gpt-4o',
        cost_usd: 0.25,
        latency_ms: 800.5,
      }),
      row({
        at: T0 + MIN,
        session: 'run-1',
        end_user: 'alice',
        model: 'gpt-4o-mini',
        cost_usd: 0.125,
        status: 500,
        outcome: 'upstream_error',
      }),
      row({
        at: T0 + 2 * MIN,
        session: 'run-1',
        end_user: 'alice',
        model: 'gpt-4o',
        cost_usd: null,
        price_source: null,
        latency_ms: 4321.25,
      }),
      // A second session, later, of another end user on another key and provider.
      row({
        at: T0 + HOUR,
        session: 'run-2',
        end_user: 'bob',
        key_id: 'key-2',
        provider: 'anthropic',
        model: 'claude-sonnet-4-5',
        cost_usd: 1.5,
        input_tokens: 1000,
        output_tokens: 200,
      }),
      // Interleaved with run-2, a third (no end user) and a row with no session at all.
      row({ at: T0 + HOUR + MIN, session: 'run-3', end_user: null, model: null, cost_usd: 0.5 }),
      row({
        at: T0 + HOUR + 2 * MIN,
        session: 'run-2',
        end_user: 'bob',
        key_id: 'key-2',
        provider: 'anthropic',
        model: 'claude-sonnet-4-5',
        cost_usd: 2,
        latency_ms: 100,
      }),
      row({ at: T0 + HOUR + 3 * MIN, session: null, end_user: 'alice', cost_usd: 9 }),
      // Another member's row in the same organization, and another organization's row in a shared session id.
      row({ at: T0 + 3 * HOUR, session: 'run-4', account_id: 'acct-b', end_user: 'carol', cost_usd: 3 }),
      makeLogRow({
        at: T0 + 4 * HOUR,
        org_id: `other-${newId()}`,
        account_id: 'acct-a',
        session: 'run-1',
        cost_usd: 100,
      }),
    ];
    await log.insertBatch(rows);
  });

  it('listSessions sums each session from its rows, newest first, in the scope alone', async () => {
    const page = await log.listSessions({ org_id: org }, { limit: 10 });
    expect(page.items).toEqual(
      ['run-4', 'run-3', 'run-2', 'run-1'].map((s) => expected(s, rows.slice(0, 8))),
    );
    expect(page.next_cursor).toBeNull();
    // A member's own rows only.
    const own = await log.listSessions({ org_id: org, account_id: 'acct-a' }, { limit: 10 });
    expect(own.items.map((s) => s.session)).toEqual(['run-3', 'run-2', 'run-1']);
    expect(own.items[2]!.cost_usd).toBe(0.375);
    expect(own.items[2]!.duration_ms).toBe(2 * MIN + 4321);
  });

  it('listSessions pages by keyset with no gap or repeat, even as a page is added to', async () => {
    const pages = await allSessions(log, { org_id: org }, 1);
    expect(pages.map((p) => p.map((s) => s.session))).toEqual([['run-4'], ['run-3'], ['run-2'], ['run-1']]);
    const first = await log.listSessions({ org_id: org }, { limit: 2 });
    // A new call of a listed session and a new session both land above the cursor: neither shifts page two.
    await log.insertBatch([
      makeLogRow({ at: T0 + 5 * HOUR, org_id: org, account_id: 'acct-a', session: 'run-5' }),
      makeLogRow({ at: T0 + 5 * HOUR, org_id: org, account_id: 'acct-a', session: 'run-2' }),
    ]);
    expect(first.items.map((s) => s.session)).toEqual(['run-4', 'run-3']);
    const second = await log.listSessions({ org_id: org }, { limit: 2, cursor: first.next_cursor });
    expect(second.items.map((s) => s.session)).toEqual(['run-2', 'run-1']);
    await expect(log.listSessions({ org_id: org }, { limit: 2, cursor: '%%%' })).rejects.toMatchObject({
      code: 'invalid_cursor',
    });
  });

  it('listSessions applies the filters to the rows it sums: key, end user, provider, model, range', async () => {
    const names = async (f: Omit<RequestFilter, 'org_id'>) =>
      (await log.listSessions({ org_id: org, ...f }, { limit: 10 })).items.map((s) => [
        s.session,
        s.requests,
      ]);
    expect(await names({ key_id: 'key-2' })).toEqual([['run-2', 2]]);
    expect(await names({ end_user: 'alice' })).toEqual([['run-1', 3]]);
    expect(await names({ provider: 'anthropic' })).toEqual([['run-2', 2]]);
    expect(await names({ model: 'gpt-4o' })).toEqual([['run-1', 2]]);
    expect(await names({ model_contains: 'GPT' })).toEqual([
      ['run-4', 1],
      ['run-1', 3],
    ]);
    const from = new Date(T0 + MIN).toISOString();
    const to = new Date(T0 + HOUR + MIN).toISOString();
    const ranged = await log.listSessions({ org_id: org, from, to }, { limit: 10 });
    expect(ranged.items).toEqual([expected('run-2', rows.slice(3, 4)), expected('run-1', rows.slice(1, 3))]);
    // Paged within a range, each session keyed by its first row in the range, in the caller's rows alone.
    const paged = await allSessions(log, { org_id: org, account_id: 'acct-a', from, to }, 1);
    expect(paged).toEqual([[expected('run-2', rows.slice(3, 4))], [expected('run-1', rows.slice(1, 3))]]);
  });

  it('sessionCalls reads one session oldest first, a page at a time, in the scope alone', async () => {
    const first = await log.sessionCalls({ org_id: org }, 'run-1', { limit: 2 });
    expect(first.items).toEqual(rows.slice(0, 2).map(toSummary));
    const rest = await log.sessionCalls({ org_id: org }, 'run-1', { limit: 2, cursor: first.next_cursor });
    expect(rest).toEqual({ items: [toSummary(rows[2]!)], next_cursor: null });
    expect(
      (await log.sessionCalls({ org_id: org, account_id: 'acct-b' }, 'run-1', { limit: 9 })).items,
    ).toEqual([]);
    expect((await log.sessionCalls({ org_id: org }, 'run-9', { limit: 9 })).items).toEqual([]);
    // Excluded keys' rows are left out by the read itself, so a page is never short of what it could hold.
    const keyOf = rows[0]!.key_id;
    expect(
      (await log.sessionCalls({ org_id: org, exclude_key_ids: [keyOf] }, 'run-1', { limit: 9 })).items,
    ).toEqual(
      rows
        .slice(0, 3)
        .filter((r) => r.key_id !== keyOf)
        .map(toSummary),
    );
    expect(
      (await log.sessionCalls({ org_id: org, exclude_key_ids: ['key-elsewhere'] }, 'run-1', { limit: 9 }))
        .items,
    ).toEqual(rows.slice(0, 3).map(toSummary));
  });

  it('usageSeriesSplit sums each named group and the rest per bucket, matching the series', async () => {
    const f = { org_id: org };
    const split = await log.usageSeriesSplit(f, 'hour', 'end_user', ['alice', '']);
    const hour = (h: number) => new Date(T0 + h * HOUR).toISOString();
    expect(split.map((p) => [p.bucket, p.group, p.requests, p.cost_usd])).toEqual([
      [hour(0), 'alice', 3, 0.375],
      [hour(1), '', 1, 0.5],
      [hour(1), 'alice', 1, 9],
      [hour(1), null, 2, 3.5],
      [hour(3), null, 1, 3],
    ]);
    // Every row is in exactly one group: the split adds up to the series, bucket by bucket.
    const series = await log.usageSeries(f, 'hour');
    for (const p of series) {
      const parts = split.filter((s) => s.bucket === p.bucket);
      expect(parts.reduce((n, s) => n + s.requests, 0)).toBe(p.requests);
      expect(parts.reduce((n, s) => n + s.input_tokens, 0)).toBe(p.input_tokens);
      expect(parts.reduce((n, s) => n + s.unknown_cost_requests, 0)).toBe(p.unknown_cost_requests);
    }
    const none = await log.usageSeriesSplit({ ...f, key_id: 'key-2' }, 'day', 'session', []);
    expect(none.map((p) => [p.bucket, p.group, p.requests, p.output_tokens])).toEqual([
      [new Date(T0 - 10 * HOUR).toISOString(), null, 2, 245],
    ]);
    const bySession = await log.usageSeriesSplit(f, 'day', 'credential_fingerprint', ['fp-abc']);
    expect(bySession.map((p) => [p.group, p.requests])).toEqual([['fp-abc', 8]]);
  });
}
