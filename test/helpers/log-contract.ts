/** LogStore half of the store contract (registered by test/store-contract.test.ts for each backend). */
import { beforeEach, describe, expect, it } from 'vitest';
import { newId } from '../../src/ids.js';
import type { RequestLogRow } from '../../src/types.js';
import type { LogStore, RequestFilter, RequestSort, RequestSummary } from '../../src/store/types.js';
import { makeLogRow, toSummary } from './log-rows.js';

export interface LogContext {
  store(): LogStore;
}

const T0 = Date.parse('2026-03-01T10:00:00.000Z');
const MIN = 60_000;
const HOUR = 3_600_000;

async function listAll(
  log: LogStore,
  f: RequestFilter,
  limit: number,
  sort?: RequestSort,
): Promise<RequestSummary[][]> {
  const pages: RequestSummary[][] = [];
  let cursor: string | null = null;
  do {
    const page = await log.listRequests(f, { limit, cursor, ...(sort && { sort }) });
    pages.push(page.items);
    cursor = page.next_cursor;
  } while (cursor && pages.length < 100);
  return pages;
}

const ids = (rows: { id: string }[]) => rows.map((r) => r.id);
const newestFirst = (rows: RequestLogRow[]) => [...rows].sort((a, b) => (a.id < b.id ? 1 : -1));

export function describeLogStoreContract(ctx: LogContext): void {
  let log: LogStore;
  let acct: string;
  beforeEach(() => {
    log = ctx.store();
    acct = `acct-${newId()}`;
  });

  describe('insertBatch', () => {
    it('round-trips every field exactly: JSON, booleans, nulls, float cost', async () => {
      const full = makeLogRow({
        account_id: acct,
        at: T0,
        error_message: 'Provider anthropic is not allowed — “quoted” ✓',
      });
      const sparse = makeLogRow({
        account_id: acct,
        at: T0 + 1,
        provider: 'anthropic',
        model: null,
        stream: false,
        status: 0,
        outcome: 'client_aborted',
        error_code: 'proxy_upstream_timeout',
        latency_ms: 12.5,
        ttfb_ms: null,
        input_tokens: null,
        cache_read_tokens: null,
        cache_write_tokens: null,
        output_tokens: null,
        reasoning_tokens: null,
        usage_source: 'none',
        cost_usd: null,
        price_source: null,
        end_user: null,
        session: null,
        properties: {},
        request_headers: {},
        response_headers: {},
        request_body: null,
        response_body: null,
        request_body_truncated: true,
        response_body_truncated: false,
        client_ip: null,
        user_agent: null,
        credential_fingerprint: null,
        error_message: null,
      });
      const big = makeLogRow({
        account_id: acct,
        at: T0 + 2,
        cost_usd: 0.1 + 0.2,
        input_tokens: 2_000_000_000_000,
      });
      expect(await log.insertBatch([full, sparse, big])).toEqual({ inserted: 3, rejected: 0 });
      expect(await log.getRequest(acct, full.id)).toEqual(full);
      expect(await log.getRequest(acct, sparse.id)).toEqual(sparse);
      expect(await log.getRequest(acct, big.id)).toEqual(big);
      const page = await log.listRequests({ account_id: acct }, { limit: 10 });
      expect(page.items).toEqual([big, sparse, full].map(toSummary));
    });

    it('normalizes created_at to the toISOString form', async () => {
      const r = makeLogRow({ account_id: acct, created_at: '2026-03-01T11:00:00+01:00' });
      await log.insertBatch([r]);
      expect((await log.getRequest(acct, r.id))!.created_at).toBe('2026-03-01T10:00:00.000Z');
    });

    it('is idempotent on id: the same batch twice stores each row once', async () => {
      const rows = [0, 1, 2].map((i) => makeLogRow({ account_id: acct, at: T0 + i }));
      const before = await log.count();
      expect(await log.insertBatch(rows)).toEqual({ inserted: 3, rejected: 0 });
      expect(await log.insertBatch(rows)).toEqual({ inserted: 0, rejected: 0 });
      const changed = { ...rows[0]!, status: 500 };
      expect(await log.insertBatch([changed, makeLogRow({ account_id: acct, at: T0 + 3 })])).toEqual({
        inserted: 1,
        rejected: 0,
      });
      expect(await log.count()).toBe(before + 4);
      expect((await log.getRequest(acct, rows[0]!.id))!.status).toBe(200);
    });

    it('skips a poison row and stores the rest of its batch', async () => {
      const good = [0, 1, 2].map((i) =>
        // A named upstream's row carries its name (KEYRELAY_UPSTREAMS): any well-formed provider name.
        makeLogRow({ account_id: acct, at: T0 + i, provider: i === 2 ? 'azure-east' : 'openai' }),
      );
      const badProvider = makeLogRow({ account_id: acct, at: T0 + 10, provider: '../bogus' });
      const badJson = makeLogRow({ account_id: acct, at: T0 + 11, properties: { n: 1n } as never });
      const badTime = makeLogRow({ account_id: acct, at: T0 + 12, created_at: 'yesterday' });
      const badNull = makeLogRow({ account_id: acct, at: T0 + 13, method: null as never });
      const result = await log.insertBatch([
        good[0]!,
        badProvider,
        good[1]!,
        badJson,
        badTime,
        badNull,
        good[2]!,
      ]);
      expect(result).toEqual({ inserted: 3, rejected: 4 });
      const page = await log.listRequests({ account_id: acct }, { limit: 10 });
      expect(ids(page.items)).toEqual(ids(newestFirst(good)));
      expect((await log.getRequest(acct, good[2]!.id))?.provider).toBe('azure-east');
    });

    it('round-trips WebSocket rows (socket row and response rows) and filters by connection_id', async () => {
      const socket = makeLogRow({
        account_id: acct,
        at: T0 + 20,
        method: 'GET',
        path: '/v1/realtime?model=gpt-realtime',
        status: 101,
        model: 'gpt-realtime',
        input_tokens: null,
        output_tokens: null,
        cost_usd: null,
        usage_source: 'none',
        ws_messages_in: 12,
        ws_messages_out: 3_000_000_000,
        ws_close_code: 4001,
        ws_close_reason: 'done ✓',
      });
      socket.connection_id = socket.id;
      const response = makeLogRow({
        account_id: acct,
        at: T0 + 21,
        method: 'WS',
        path: '/v1/realtime?model=gpt-realtime',
        connection_id: socket.id,
        input_tokens: 132,
        cache_read_tokens: 64,
        input_audio_tokens: 13,
        cache_read_audio_tokens: 5,
        output_audio_tokens: 91,
        output_tokens: 121,
      });
      const other = makeLogRow({ account_id: acct, at: T0 + 22 });
      expect(await log.insertBatch([response, socket, other])).toEqual({ inserted: 3, rejected: 0 });
      expect(await log.getRequest(acct, socket.id)).toEqual(socket);
      expect(await log.getRequest(acct, response.id)).toEqual(response);
      const page = await log.listRequests({ account_id: acct, connection_id: socket.id }, { limit: 10 });
      expect(page.items).toEqual([toSummary(response), toSummary(socket)]);
    });

    it('accepts an empty batch', async () => {
      expect(await log.insertBatch([])).toEqual({ inserted: 0, rejected: 0 });
    });
  });

  describe('reads', () => {
    it('getRequest only returns a row to its own account', async () => {
      const r = makeLogRow({ account_id: acct });
      await log.insertBatch([r]);
      expect(await log.getRequest('someone-else', r.id)).toBeNull();
      expect(await log.getRequest(acct, 'missing')).toBeNull();
    });

    it('applies every filter of listRequests, always within the account', async () => {
      const other = `acct-${newId()}`;
      const base = { account_id: acct };
      const rows = {
        plain: makeLogRow({ ...base, at: T0 }),
        key2: makeLogRow({ ...base, at: T0 + MIN, key_id: 'key-2' }),
        anthropic: makeLogRow({ ...base, at: T0 + 2 * MIN, provider: 'anthropic', model: 'claude-sonnet-4' }),
        failed: makeLogRow({ ...base, at: T0 + 3 * MIN, status: 502, outcome: 'upstream_error' }),
        tagged: makeLogRow({ ...base, at: T0 + 4 * MIN, properties: { env: 'staging', team: 'x' } }),
        person: makeLogRow({ ...base, at: T0 + 5 * MIN, end_user: 'user-9', session: 'sess-9' }),
        foreign: makeLogRow({ account_id: other, at: T0 + 6 * MIN, key_id: 'key-2' }),
      };
      await log.insertBatch(Object.values(rows));
      const find = async (f: Omit<RequestFilter, 'account_id'>) =>
        ids((await log.listRequests({ account_id: acct, ...f }, { limit: 50 })).items).sort();
      const idsOf = (...rs: RequestLogRow[]) => ids(rs).sort();
      const { plain, key2, anthropic, failed, tagged, person } = rows;
      expect(await find({})).toEqual(idsOf(plain, key2, anthropic, failed, tagged, person));
      expect(await find({ key_id: 'key-2' })).toEqual(idsOf(key2));
      expect(await find({ provider: 'anthropic' })).toEqual(idsOf(anthropic));
      expect(await find({ model: 'claude-sonnet-4' })).toEqual(idsOf(anthropic));
      expect(await find({ model: 'claude' })).toEqual([]);
      expect(await find({ model_contains: 'Claude' })).toEqual(idsOf(anthropic));
      expect(await find({ model_contains: 'sonnet-4' })).toEqual(idsOf(anthropic));
      expect(await find({ model_contains: 'claude%' })).toEqual([]);
      expect(await find({ model_contains: 'claude_sonnet' })).toEqual([]);
      expect(await find({ status: 502 })).toEqual(idsOf(failed));
      expect(await find({ outcome: 'upstream_error' })).toEqual(idsOf(failed));
      expect(
        await find({ from: new Date(T0 + MIN).toISOString(), to: new Date(T0 + 3 * MIN).toISOString() }),
      ).toEqual(idsOf(key2, anthropic));
      expect(await find({ property: { name: 'env', value: 'staging' } })).toEqual(idsOf(tagged));
      expect(await find({ property: { name: 'team.name', value: 'a "quoted" team' } })).toEqual(
        idsOf(plain, key2, anthropic, failed, person),
      );
      expect(await find({ property: { name: 'env', value: 'nope' } })).toEqual([]);
      expect(await find({ property: { name: 'team' } })).toEqual(idsOf(tagged));
      expect(await find({ property: { name: 'nope' } })).toEqual([]);
      expect(await find({ end_user: 'user-9' })).toEqual(idsOf(person));
      expect(await find({ session: 'sess-9' })).toEqual(idsOf(person));
      expect(await find({ key_id: 'key-2', provider: 'openai' })).toEqual(idsOf(key2));
      expect(await find({ exclude_key_ids: ['key-2', 'key-x'] })).toEqual(
        idsOf(plain, anthropic, failed, tagged, person),
      );
      const foreign = await log.listRequests({ account_id: other }, { limit: 50 });
      expect(ids(foreign.items)).toEqual([rows.foreign.id]);
    });

    it('pages newest first with no gap or duplicate, ending with a null cursor', async () => {
      const rows = Array.from({ length: 23 }, (_, i) => makeLogRow({ account_id: acct, at: T0 + i * 1000 }));
      rows.push(makeLogRow({ account_id: acct, at: T0 + 5000 })); // same millisecond as another row
      await log.insertBatch(rows);
      await log.insertBatch([makeLogRow({ account_id: `acct-${newId()}`, at: T0 + 500 })]);
      for (const limit of [1, 5, 8, 24, 100]) {
        const pages = await listAll(log, { account_id: acct }, limit);
        expect(pages.flat().map((r) => r.id)).toEqual(ids(newestFirst(rows)));
        expect(pages.every((p) => p.length <= limit)).toBe(true);
        expect(pages.length).toBe(Math.max(1, Math.ceil(rows.length / limit)));
      }
      const filtered = await listAll(log, { account_id: acct, from: new Date(T0 + 10_000).toISOString() }, 4);
      expect(filtered.flat().map((r) => r.id)).toEqual(
        ids(newestFirst(rows.filter((r) => r.created_at >= new Date(T0 + 10_000).toISOString()))),
      );
    });

    it('sorts by time, cost, tokens and latency either way, paging by keyset; unpriced last, ties by id', async () => {
      // Few distinct values, so ties span pages; some costs and tokens unknown.
      const rows = Array.from({ length: 23 }, (_, i) =>
        makeLogRow({
          account_id: acct,
          at: T0 + i * 1000,
          cost_usd: i % 5 === 0 ? null : [0.0000123, 0.5, 0.00007][i % 3]!,
          input_tokens: i % 7 === 0 ? null : [10, 2000, 300][i % 3]!,
          output_tokens: i % 4 === 0 ? null : 5,
          latency_ms: [1234.5, 80, 99999][i % 3]!,
        }),
      );
      await log.insertBatch(rows);
      await log.insertBatch([makeLogRow({ account_id: `acct-${newId()}`, at: T0 + 500, cost_usd: 9 })]);
      const value: Record<RequestSort['by'], (r: RequestLogRow) => number | null> = {
        time: () => 0,
        cost: (r) => r.cost_usd,
        tokens: (r) => (r.input_tokens ?? 0) + (r.output_tokens ?? 0),
        latency: (r) => r.latency_ms,
      };
      for (const by of ['time', 'cost', 'tokens', 'latency'] as const) {
        for (const dir of ['asc', 'desc'] as const) {
          const sign = dir === 'asc' ? 1 : -1;
          const expected = [...rows].sort((a, b) => {
            const [x, y] = [value[by](a), value[by](b)];
            if (x === null || y === null)
              return x === y ? sign * (a.id < b.id ? -1 : 1) : x === null ? 1 : -1;
            return x !== y ? sign * (x - y) : sign * (a.id < b.id ? -1 : 1);
          });
          for (const limit of [1, 4, 7, 50]) {
            const pages = await listAll(log, { account_id: acct }, limit, { by, dir });
            expect([by, dir, limit, pages.flat().map((r) => r.id)]).toEqual([by, dir, limit, ids(expected)]);
            expect(pages.length).toBe(Math.ceil(rows.length / limit));
          }
        }
      }
      // A row written between two pages lands where the sort puts it: the next page neither repeats nor
      // skips one of the rows already there.
      const sort: RequestSort = { by: 'cost', dir: 'desc' };
      const first = await log.listRequests({ account_id: acct }, { limit: 5, sort });
      const late = makeLogRow({ account_id: acct, at: T0 + 100_000, cost_usd: 0.00007 });
      await log.insertBatch([late]);
      const rest = await listAll(log, { account_id: acct }, 6, sort);
      expect(rest.length).toBeGreaterThan(0);
      let cursor = first.next_cursor;
      const seen = [...ids(first.items)];
      while (cursor) {
        const page = await log.listRequests({ account_id: acct }, { limit: 6, cursor, sort });
        seen.push(...ids(page.items));
        cursor = page.next_cursor;
      }
      expect(seen.sort()).toEqual(ids([...rows, late]).sort());
      // A sorted search (the full-text index) and a forged sorted cursor.
      const found = await log.listRequests(
        { account_id: acct, search: 'héllo' },
        { limit: 50, sort: { by: 'latency', dir: 'asc' } },
      );
      expect(found.items.map((r) => r.latency_ms)).toEqual(
        [...found.items.map((r) => r.latency_ms)].sort((a, b) => a - b),
      );
      const forged = Buffer.from(JSON.stringify(['x', 'y'])).toString('base64url');
      await expect(
        log.listRequests({ account_id: acct }, { limit: 5, cursor: forged, sort }),
      ).rejects.toMatchObject({ name: 'DomainError', code: 'invalid_cursor' });
    });

    it('refuses a cursor it did not issue', async () => {
      await expect(
        log.listRequests({ account_id: acct }, { limit: 5, cursor: '!!not-a-cursor' }),
      ).rejects.toMatchObject({ name: 'DomainError', code: 'invalid_cursor' });
    });

    it('listRecent returns the newest rows across accounts, or of one account', async () => {
      // Far in the future, so they are the newest rows of the whole store.
      const future = Date.parse('2099-01-01T00:00:00.000Z');
      const other = `acct-${newId()}`;
      const a1 = makeLogRow({ account_id: acct, at: future });
      const b1 = makeLogRow({ account_id: other, at: future + 1 });
      const a2 = makeLogRow({ account_id: acct, at: future + 2 });
      await log.insertBatch([a1, b1, a2]);
      expect(await log.listRecent({ limit: 3 })).toEqual([a2, b1, a1].map(toSummary));
      expect(await log.listRecent({ limit: 2, account_id: acct })).toEqual([a2, a1].map(toSummary));
    });
  });

  describe('usage', () => {
    async function seedUsage() {
      const base = { account_id: acct };
      const hour0 = T0; // 10:00
      const rows = [
        makeLogRow({
          ...base,
          at: hour0 + 1 * MIN,
          latency_ms: 100,
          input_tokens: 10,
          output_tokens: 1,
          cache_read_tokens: 5,
          cost_usd: 0.25,
        }),
        makeLogRow({
          ...base,
          at: hour0 + 2 * MIN,
          latency_ms: 200,
          input_tokens: 20,
          output_tokens: 2,
          cache_read_tokens: null,
          cost_usd: null,
        }),
        makeLogRow({
          ...base,
          at: hour0 + 2 * MIN + 1,
          latency_ms: 300,
          input_tokens: null,
          output_tokens: null,
          cache_read_tokens: 0,
          cost_usd: 0.5,
          status: 429,
          outcome: 'upstream_error',
          key_id: 'key-2',
        }),
        makeLogRow({
          ...base,
          at: hour0 + 30 * MIN,
          latency_ms: 400,
          input_tokens: 40,
          output_tokens: 4,
          cache_read_tokens: 1,
          cost_usd: 0.125,
          provider: 'anthropic',
          model: 'claude-sonnet-4',
        }),
        makeLogRow({
          ...base,
          at: hour0 + HOUR + 5 * MIN,
          latency_ms: 1000,
          input_tokens: 7,
          output_tokens: 3,
          cache_read_tokens: 2,
          cost_usd: 1,
          outcome: 'client_aborted',
          status: 200,
          model: null,
        }),
        makeLogRow({ account_id: `acct-${newId()}`, at: hour0 + 3 * MIN, latency_ms: 5, cost_usd: 100 }),
      ];
      await log.insertBatch(rows);
    }

    it('usageSeries buckets by hour in UTC with sums, error and unknown-cost counts, p50/p95', async () => {
      await seedUsage();
      const points = await log.usageSeries({ account_id: acct }, 'hour');
      expect(points).toEqual([
        {
          bucket: '2026-03-01T10:00:00.000Z',
          requests: 4,
          errors: 1,
          input_tokens: 70,
          output_tokens: 7,
          cache_read_tokens: 6,
          cost_usd: 0.875,
          unknown_cost_requests: 1,
          partial_cost_requests: 0,
          latency_p50_ms: 250,
          latency_p95_ms: expect.closeTo(385, 6),
        },
        {
          bucket: '2026-03-01T11:00:00.000Z',
          requests: 1,
          errors: 1,
          input_tokens: 7,
          output_tokens: 3,
          cache_read_tokens: 2,
          cost_usd: 1,
          unknown_cost_requests: 0,
          partial_cost_requests: 0,
          latency_p50_ms: 1000,
          latency_p95_ms: 1000,
        },
      ]);
    });

    it('usageSeries buckets by minute and by day, honouring filters', async () => {
      await seedUsage();
      const minutes = await log.usageSeries({ account_id: acct }, 'minute');
      expect(minutes.map((p) => [p.bucket, p.requests])).toEqual([
        ['2026-03-01T10:01:00.000Z', 1],
        ['2026-03-01T10:02:00.000Z', 2],
        ['2026-03-01T10:30:00.000Z', 1],
        ['2026-03-01T11:05:00.000Z', 1],
      ]);
      const days = await log.usageSeries({ account_id: acct, key_id: 'key-1' }, 'day');
      expect(days).toHaveLength(1);
      expect(days[0]).toMatchObject({ bucket: '2026-03-01T00:00:00.000Z', requests: 4, cost_usd: 1.375 });
      const window = await log.usageSeries(
        {
          account_id: acct,
          from: new Date(T0 + 2 * MIN).toISOString(),
          to: new Date(T0 + 3 * MIN).toISOString(),
        },
        'day',
      );
      expect(window).toEqual([
        expect.objectContaining({ requests: 2, latency_p50_ms: 250, latency_p95_ms: expect.closeTo(295, 6) }),
      ]);
      expect(await log.usageSeries({ account_id: `acct-${newId()}` }, 'hour')).toEqual([]);
    });

    it('percentiles are exact for latencies no short decimal writes (as doubles, not as rounded text)', async () => {
      const a = `acct-${newId()}`;
      const odd = [0.1 + 0.2, 1 / 3, 2 / 3 + 1e-12];
      // One an hour: each bucket's percentiles are its one latency, to the last bit.
      await log.insertBatch(
        odd.map((latency_ms, i) => makeLogRow({ account_id: a, at: T0 + i * 3_600_000, latency_ms })),
      );
      const points = await log.usageSeries({ account_id: a }, 'hour');
      expect(points.map((p) => [p.latency_p50_ms, p.latency_p95_ms])).toEqual(odd.map((l) => [l, l]));
    });

    it('records batches against the first key, and their results cost once, even when raced', async () => {
      const a = `acct-${newId()}`;
      const id = `batch_${newId()}`;
      const seen = {
        provider: 'openai' as const,
        batch_id: id,
        key_id: 'key-a',
        account_id: a,
        at: new Date(T0).toISOString(),
        created_here: true,
        status: 'validating',
        request_counts: { total: 3, completed: 0, failed: 0 },
        output_file_id: null,
      };
      await log.upsertBatch(seen);
      // A later retrieval (another key even) updates status and counts, never the owner.
      await log.upsertBatch({
        ...seen,
        key_id: 'key-b',
        at: new Date(T0 + MIN).toISOString(),
        created_here: false,
        status: 'completed',
        request_counts: { total: 3, completed: 2, failed: 1 },
        output_file_id: 'file-out-1',
      });
      const found = await log.batchByOutputFile(a, 'openai', 'file-out-1');
      expect(found).toMatchObject({
        batch_id: id,
        key_id: 'key-a',
        created_here: true,
        status: 'completed',
        request_counts: { total: 3, completed: 2, failed: 1 },
        results_cost_usd: null,
        results_fetched_at: null,
      });
      expect(await log.batchByOutputFile(a, 'anthropic', 'file-out-1')).toBeNull();
      const claim = {
        provider: 'openai' as const,
        batch_id: id,
        key_id: 'key-a',
        account_id: a,
        at: new Date(T0 + 2 * MIN).toISOString(),
        request_id: 'req-1',
        cost_usd: 0.5,
        succeeded: 2,
        unpriced: 0,
        broken: 1,
      };
      const won = await Promise.all(
        [1, 2, 3, 4].map((i) => log.claimBatchResults({ ...claim, request_id: `req-${i}` })),
      );
      expect(won.filter(Boolean)).toHaveLength(1);
      // A batch keyrelay never saw is created by its first download, not created here.
      expect(
        await log.claimBatchResults({ ...claim, batch_id: 'msgbatch_elsewhere', provider: 'anthropic' }),
      ).toBe(true);
      const list = await log.listBatches(a, 10);
      expect(list.map((b) => [b.batch_id, b.created_here, b.results_cost_usd, b.results_broken])).toEqual([
        ['msgbatch_elsewhere', false, 0.5, 1],
        [id, true, 0.5, 1],
      ]);
      expect(list[1]!.results_request_id).toMatch(/^req-[1-4]$/);
      expect(await log.listBatches(`acct-${newId()}`, 10)).toEqual([]);
    });

    it("keeps each account's ledger of a batch its own: owner, output file, results cost and request", async () => {
      const a = `acct-${newId()}`;
      const b = `acct-${newId()}`;
      const id = `batch_${newId()}`;
      const at = new Date(T0).toISOString();
      const seen = {
        provider: 'openai' as const,
        batch_id: id,
        key_id: 'key-a',
        account_id: a,
        at,
        created_here: true,
        status: 'completed',
        request_counts: { total: 3, completed: 3, failed: 0 },
        output_file_id: `file-out-${id}`,
      };
      await log.upsertBatch(seen);
      // Account b shows the same batch (keys of both reach one provider organization): b's own entry.
      await log.upsertBatch({ ...seen, key_id: 'key-b', account_id: b, created_here: false });
      expect(await log.batchByOutputFile(b, 'openai', `file-out-${id}`)).toMatchObject({
        key_id: 'key-b',
        account_id: b,
        created_here: false,
      });
      const claim = {
        provider: 'openai' as const,
        batch_id: id,
        at,
        cost_usd: 0.5,
        succeeded: 3,
        unpriced: 0,
        broken: 0,
      };
      // b downloads first: that counts for b only; a's own first download still counts for a.
      expect(
        await log.claimBatchResults({ ...claim, key_id: 'key-b', account_id: b, request_id: 'req-b' }),
      ).toBe(true);
      expect(
        await log.claimBatchResults({ ...claim, key_id: 'key-a', account_id: a, request_id: 'req-a' }),
      ).toBe(true);
      expect(
        await log.claimBatchResults({ ...claim, key_id: 'key-a', account_id: a, request_id: 'req-a2' }),
      ).toBe(false);
      const [mine] = await log.listBatches(a, 10);
      expect(mine).toMatchObject({ key_id: 'key-a', created_here: true, results_request_id: 'req-a' });
      const [theirs] = await log.listBatches(b, 10);
      expect(theirs).toMatchObject({ key_id: 'key-b', created_here: false, results_request_id: 'req-b' });
      // A third account that never saw it has no entry to find by its output file.
      expect(await log.batchByOutputFile(`acct-${newId()}`, 'openai', `file-out-${id}`)).toBeNull();
    });

    it('counts unpriced rows (cost null) as unknown cost, never rows that bill nothing', async () => {
      const a = `acct-${newId()}`;
      await log.insertBatch([
        makeLogRow({ account_id: a, at: T0, cost_usd: null, price_source: 'unpriced: no model named' }),
        makeLogRow({ account_id: a, at: T0 + 1, cost_usd: null, price_source: null }),
        makeLogRow({
          account_id: a,
          at: T0 + 2,
          cost_usd: null,
          price_source: 'not billed: no successful response',
        }),
        makeLogRow({ account_id: a, at: T0 + 3, cost_usd: 0, price_source: 'not billed' }),
        makeLogRow({ account_id: a, at: T0 + 4, cost_usd: 0.25, price_source: 'genai-prices@0.1.8' }),
        makeLogRow({
          account_id: a,
          at: T0 + 5,
          cost_usd: 0.5,
          price_source: 'partial: genai-prices@0.1.8 has no price for image_generations ×1 on gpt-4o',
        }),
      ]);
      const [point] = await log.usageSeries({ account_id: a }, 'day');
      expect(point).toMatchObject({
        requests: 6,
        cost_usd: 0.75,
        unknown_cost_requests: 2,
        partial_cost_requests: 1,
      });
      const stored = await log.listRequests({ account_id: a }, { limit: 10 });
      expect(stored.items.map((r) => r.price_source)).toContain('unpriced: no model named');
    });

    it('pricingGaps counts unpriced and partial rows by provider, model and price_source, in the range', async () => {
      // A range no other test writes in: the query spans every account.
      const at = Date.parse('2031-05-05T00:00:00.000Z');
      const partial = 'partial: genai-prices@0.1.8 has no price for image_generations ×1 on gpt-4o';
      const unknown = 'unpriced: genai-prices@0.1.8 has no price for gpt-9';
      const row = (i: number, over: Partial<RequestLogRow>) =>
        makeLogRow({ account_id: `acct-${newId()}`, at: at + i * 1000, ...over });
      await log.insertBatch([
        row(0, { model: 'gpt-4o', price_source: partial, tool_uses: { image_generations: 1 } }),
        row(1, { model: 'gpt-4o', price_source: partial, tool_uses: { image_generations: 1 } }),
        row(2, { model: 'gpt-9', cost_usd: null, price_source: unknown }),
        row(3, { model: 'gpt-4o', price_source: 'genai-prices@0.1.8' }),
        row(4, { model: 'gpt-4o', cost_usd: 0, price_source: 'not billed' }),
        row(3_600, { model: 'gpt-9', cost_usd: null, price_source: unknown }), // an hour later: outside
      ]);
      const from = new Date(at).toISOString();
      const to = new Date(at + 3_600_000).toISOString();
      expect(await log.pricingGaps(from, to)).toEqual([
        { provider: 'openai', model: 'gpt-4o', price_source: partial, requests: 2 },
        { provider: 'openai', model: 'gpt-9', price_source: unknown, requests: 1 },
      ]);
    });

    it("loggedCosts sums every account's rows of the named providers by provider, model and credential, in the range", async () => {
      // A range no other test writes in: the query spans every account.
      const at = Date.parse('2031-06-06T00:00:00.000Z');
      const row = (i: number, over: Partial<RequestLogRow>) =>
        makeLogRow({ account_id: `acct-${newId()}`, at: at + i * 1000, ...over });
      const partial = 'partial: genai-prices@0.1.8 has no price for web_search ×1 on gpt-4o';
      const tokens = (input: number, read: number, write: number, output: number) => ({
        input_tokens: input,
        cache_read_tokens: read,
        cache_write_tokens: write,
        output_tokens: output,
      });
      await log.insertBatch([
        row(0, { model: 'gpt-4o', ...tokens(10, 4, 0, 5), cost_usd: 0.25 }),
        row(1, { model: 'gpt-4o', ...tokens(20, 6, 0, 1), cost_usd: 0.5, price_source: partial }),
        // The same model with another credential: a group of its own.
        row(2, {
          model: 'gpt-4o',
          ...tokens(4, 0, 0, 4),
          cost_usd: 0.125,
          credential_fingerprint: 'fp-other',
        }),
        row(3, { model: 'gpt-9', ...tokens(3, 0, 0, 2), cost_usd: null, price_source: 'unpriced: x' }),
        row(4, {
          provider: 'anthropic',
          model: 'claude-sonnet-4',
          ...tokens(7, 2, 3, 8),
          cost_usd: 1,
          credential_fingerprint: null,
        }),
        row(5, { provider: 'azure', model: 'gpt-4o', cost_usd: 9 }), // not a provider asked for
        row(86_400, { model: 'gpt-4o', cost_usd: 100 }), // the next day: outside
      ]);
      const from = new Date(at).toISOString();
      const to = new Date(at + 86_400_000).toISOString();
      const group = (
        provider: string,
        model: string,
        credential_fingerprint: string | null,
        requests: number,
        t: ReturnType<typeof tokens>,
        cost_usd: number,
        unpriced_requests: number,
        partial_requests: number,
      ) => ({
        provider,
        model,
        credential_fingerprint,
        requests,
        ...t,
        cost_usd,
        unpriced_requests,
        partial_requests,
      });
      expect(await log.loggedCosts(from, to, ['openai', 'anthropic'])).toEqual([
        group('anthropic', 'claude-sonnet-4', null, 1, tokens(7, 2, 3, 8), 1, 0, 0),
        group('openai', 'gpt-4o', 'fp-abc', 2, tokens(30, 10, 0, 6), 0.75, 0, 1),
        group('openai', 'gpt-4o', 'fp-other', 1, tokens(4, 0, 0, 4), 0.125, 0, 0),
        group('openai', 'gpt-9', 'fp-abc', 1, tokens(3, 0, 0, 2), 0, 1, 0),
      ]);
      expect(await log.loggedCosts(from, to, [])).toEqual([]);
    });

    it('usageBreakdown groups by model, key_id and provider, most requests first', async () => {
      await seedUsage();
      const byModel = await log.usageBreakdown({ account_id: acct }, 'model');
      expect(byModel.map((r) => [r.group, r.requests, r.cost_usd, r.unknown_cost_requests])).toEqual([
        ['gpt-4o-mini', 3, 0.75, 1],
        ['', 1, 1, 0],
        ['claude-sonnet-4', 1, 0.125, 0],
      ]);
      const byKey = await log.usageBreakdown({ account_id: acct }, 'key_id');
      expect(byKey).toEqual([
        {
          group: 'key-1',
          requests: 4,
          errors: 1,
          input_tokens: 77,
          output_tokens: 10,
          cache_read_tokens: 8,
          cost_usd: 1.375,
          unknown_cost_requests: 1,
          partial_cost_requests: 0,
          latency_p50_ms: 300,
          latency_p95_ms: expect.closeTo(910, 6),
        },
        {
          group: 'key-2',
          requests: 1,
          errors: 1,
          input_tokens: 0,
          output_tokens: 0,
          cache_read_tokens: 0,
          cost_usd: 0.5,
          unknown_cost_requests: 0,
          partial_cost_requests: 0,
          latency_p50_ms: 300,
          latency_p95_ms: 300,
        },
      ]);
      const byProvider = await log.usageBreakdown(
        { account_id: acct, from: new Date(T0).toISOString() },
        'provider',
      );
      expect(byProvider.map((r) => [r.group, r.requests])).toEqual([
        ['openai', 4],
        ['anthropic', 1],
      ]);
    });

    it('usageBreakdown groups by end user, session, credential and a property’s value ("" for none)', async () => {
      const a = `acct-${newId()}`;
      const rows: Partial<RequestLogRow>[] = [
        {
          end_user: 'alice',
          session: 's1',
          credential_fingerprint: 'fp-a',
          properties: { env: 'prod' },
          cost_usd: 1,
        },
        {
          end_user: 'alice',
          session: 's1',
          credential_fingerprint: 'fp-a',
          properties: { env: 'dev' },
          cost_usd: 2,
        },
        {
          end_user: 'bob',
          session: 's2',
          credential_fingerprint: 'fp-b',
          properties: { env: 'prod' },
          cost_usd: 4,
        },
        { end_user: null, session: null, credential_fingerprint: null, properties: {}, cost_usd: 8 },
        {
          end_user: 'bob',
          session: 's2',
          credential_fingerprint: 'fp-a',
          properties: { 'it\'s "odd"': 'x' },
          cost_usd: 16,
        },
      ];
      await log.insertBatch(rows.map((r, i) => makeLogRow({ ...r, account_id: a, at: T0 + i })));
      const sums = async (by: Parameters<LogStore['usageBreakdown']>[1]) =>
        (await log.usageBreakdown({ account_id: a }, by)).map((r) => [r.group, r.requests, r.cost_usd]);
      expect(await sums('end_user')).toEqual([
        ['alice', 2, 3],
        ['bob', 2, 20],
        ['', 1, 8],
      ]);
      expect(await sums('session')).toEqual([
        ['s1', 2, 3],
        ['s2', 2, 20],
        ['', 1, 8],
      ]);
      expect(await sums('credential_fingerprint')).toEqual([
        ['fp-a', 3, 19],
        ['', 1, 8],
        ['fp-b', 1, 4],
      ]);
      expect(await sums({ property: 'env' })).toEqual([
        ['', 2, 24],
        ['prod', 2, 5],
        ['dev', 1, 2],
      ]);
      expect(await sums({ property: 'it\'s "odd"' })).toEqual([
        ['', 4, 15],
        ['x', 1, 16],
      ]);
      const bobs = await log.usageBreakdown({ account_id: a, end_user: 'bob' }, { property: 'env' });
      expect(bobs.map((r) => [r.group, r.requests])).toEqual([
        ['', 1],
        ['prod', 1],
      ]);
    });
  });

  describe('spendSince', () => {
    it('sums the known costs of one key from `since` on (inclusive), 0 when there are none', async () => {
      const key = `key-${newId()}`;
      await log.insertBatch([
        makeLogRow({ account_id: acct, key_id: key, at: T0 - 1, cost_usd: 100 }),
        makeLogRow({ account_id: acct, key_id: key, at: T0, cost_usd: 0.25 }),
        makeLogRow({ account_id: acct, key_id: key, at: T0 + HOUR, cost_usd: 1.5 }),
        makeLogRow({ account_id: acct, key_id: key, at: T0 + 2 * HOUR, cost_usd: null }),
        makeLogRow({ account_id: acct, key_id: `other-${key}`, at: T0 + HOUR, cost_usd: 7 }),
      ]);
      expect(await log.spendSince(key, new Date(T0).toISOString())).toBeCloseTo(1.75, 12);
      expect(await log.spendSince(key, new Date(T0 - 1).toISOString())).toBeCloseTo(101.75, 12);
      expect(await log.spendSince(key, new Date(T0 + 3 * HOUR).toISOString())).toBe(0);
      expect(await log.spendSince(`none-${key}`, new Date(T0).toISOString())).toBe(0);
    });

    it("with an end user, sums that end user's rows of the key alone, never the key's hourly spend", async () => {
      const key = `key-${newId()}`;
      const since = new Date(T0).toISOString();
      await log.insertBatch([
        makeLogRow({ account_id: acct, key_id: key, at: T0 - 1, cost_usd: 100, end_user: 'alice' }),
        makeLogRow({ account_id: acct, key_id: key, at: T0, cost_usd: 0.25, end_user: 'alice' }),
        makeLogRow({ account_id: acct, key_id: key, at: T0 + HOUR, cost_usd: 1.5, end_user: 'alice' }),
        makeLogRow({ account_id: acct, key_id: key, at: T0 + HOUR, cost_usd: 3, end_user: 'Alice' }),
        makeLogRow({ account_id: acct, key_id: key, at: T0 + HOUR, cost_usd: 5, end_user: null }),
        makeLogRow({ account_id: acct, key_id: key, at: T0 + HOUR, cost_usd: 0.5, end_user: 'ünï "cödé"' }),
        makeLogRow({
          account_id: acct,
          key_id: `other-${key}`,
          at: T0 + HOUR,
          cost_usd: 7,
          end_user: 'alice',
        }),
      ]);
      await log.addSpend([{ key_id: key, hour: since, nanos: 9_000_000_000 }]);
      expect(await log.spendSince(key, since, 'alice')).toBeCloseTo(1.75, 12);
      expect(await log.spendSince(key, since, 'Alice')).toBe(3);
      expect(await log.spendSince(key, since, 'ünï "cödé"')).toBe(0.5);
      expect(await log.spendSince(key, since, 'nobody')).toBe(0);
      expect(await log.spendSince(key, since)).toBeCloseTo(19.25, 12);
    });

    // What budgets read with the request log off (src/log/spend-rollup.ts): hourly sums instead of rows.
    it("adds a key's hourly spend kept without rows, summed exactly, from the hour `since` starts", async () => {
      const key = `key-${newId()}`;
      const hour = (n: number) => new Date(T0 + n * HOUR).toISOString();
      await log.insertBatch([makeLogRow({ account_id: acct, key_id: key, at: T0 + HOUR, cost_usd: 0.5 })]);
      await log.addSpend([
        { key_id: key, hour: hour(-1), nanos: 7_000_000_000 },
        { key_id: key, hour: hour(0), nanos: 1 },
        { key_id: `other-${key}`, hour: hour(0), nanos: 5_000_000_000 },
      ]);
      // Added to what the hour holds, past 2^32 nanodollars.
      await log.addSpend([{ key_id: key, hour: hour(0), nanos: 4_250_000_000 }]);
      await log.addSpend([]);
      expect(await log.spendSince(key, hour(0))).toBeCloseTo(4.750000001, 12);
      expect(await log.spendSince(key, hour(-1))).toBeCloseTo(11.750000001, 12);
      expect(await log.spendSince(key, hour(2))).toBe(0);
      expect(await log.spendSince(`other-${key}`, hour(0))).toBe(5);
    });
  });

  describe('prune', () => {
    it("deletes rows before `before` and strips the bodies of each account's rows before its cutoff", async () => {
      const old = Date.parse('2001-01-01T00:00:00.000Z');
      const other = `other-${acct}`;
      const rows = Array.from({ length: 12 }, (_, i) => makeLogRow({ account_id: acct, at: old + i * HOUR }));
      const others = Array.from({ length: 12 }, (_, i) =>
        makeLogRow({ account_id: other, at: old + i * HOUR }),
      );
      await log.insertBatch([...rows, ...others]);
      const before = await log.count();
      const result = await log.prune(new Date(old + 5 * HOUR).toISOString(), [
        { account_id: acct, before: new Date(old + 8 * HOUR).toISOString() },
      ]);
      expect(result).toEqual({ deleted: 10 });
      expect(await log.count()).toBe(before - 10);
      for (const [i, r] of rows.entries()) {
        const got = await log.getRequest(acct, r.id);
        if (i < 5) expect(got).toBeNull();
        else if (i < 8) expect(got).toEqual({ ...r, request_body: null, response_body: null });
        else expect(got).toEqual(r);
      }
      // Another account's rows keep their bodies as long as the rows.
      for (const r of others.slice(5)) expect(await log.getRequest(other, r.id)).toEqual(r);
      expect(await log.prune(new Date(old + 5 * HOUR).toISOString())).toEqual({ deleted: 0 });
      expect(await log.prune(new Date(old + 12 * HOUR).toISOString())).toEqual({ deleted: 14 });
    });

    it("keeps keys' hourly spend 62 days whatever the retention, and drops it with the rows past that", async () => {
      const key = `key-${newId()}`;
      const now = Math.floor(Date.now() / HOUR) * HOUR;
      const daysAgo = (d: number) => new Date(now - d * 24 * HOUR).toISOString();
      await log.addSpend([
        { key_id: key, hour: daysAgo(70), nanos: 3 },
        { key_id: key, hour: daysAgo(40), nanos: 2 },
        { key_id: key, hour: daysAgo(1), nanos: 1 },
      ]);
      await log.prune(daysAgo(7)); // a week's retention: a month's budget may still need the 40-day-old hour
      expect(await log.spendSince(key, daysAgo(80))).toBe(3 / 1e9);
      await log.prune(daysAgo(0));
      expect(await log.spendSince(key, daysAgo(80))).toBe(3 / 1e9);
      // A longer retention keeps hours as long as it keeps rows.
      await log.addSpend([{ key_id: key, hour: daysAgo(80), nanos: 10 }]);
      await log.prune(daysAgo(100));
      expect(await log.spendSince(key, daysAgo(300))).toBe(13 / 1e9);
    });

    // Time ranges and retention go by id (ids start with their time): a row's created_at decides to the
    // millisecond, also for rows written before id and created_at came from one clock reading, whose id was
    // made a moment earlier.
    it('finds and prunes by created_at to the millisecond, also rows whose id is older than created_at', async () => {
      const from = Date.parse('1999-06-01T10:00:00.000Z');
      const to = from + HOUR;
      const lagging = (idAt: number, createdAt: number) =>
        makeLogRow({ account_id: acct, id: newId(idAt), created_at: new Date(createdAt).toISOString() });
      const rows = {
        justBefore: makeLogRow({ account_id: acct, at: from - 1 }),
        atFrom: makeLogRow({ account_id: acct, at: from }),
        laggingIn: lagging(from - 2_000, from + 500),
        laggingBefore: lagging(from - 30_000, from - 1),
        lastIn: makeLogRow({ account_id: acct, at: to - 1 }),
        laggingOut: lagging(to - 1_000, to + 10),
        atTo: makeLogRow({ account_id: acct, at: to }),
      };
      await log.insertBatch(Object.values(rows));
      const range = { account_id: acct, from: new Date(from).toISOString(), to: new Date(to).toISOString() };
      const inRange = ids([rows.atFrom, rows.laggingIn, rows.lastIn]).sort();
      expect(ids((await log.listRequests(range, { limit: 50 })).items).sort()).toEqual(inRange);
      const [byProvider] = await log.usageBreakdown(range, 'provider');
      expect(byProvider?.requests).toBe(3);
      const series = await log.usageSeries({ account_id: acct, from: range.from }, 'hour');
      expect(series.map((p) => [p.bucket, p.requests])).toEqual([
        ['1999-06-01T10:00:00.000Z', 3],
        ['1999-06-01T11:00:00.000Z', 2],
      ]);

      // Retention: everything created before `to`, lagging ids included, and nothing created at or after it.
      expect(await log.prune(new Date(to).toISOString())).toEqual({ deleted: 5 });
      const left = await log.listRequests({ account_id: acct }, { limit: 50 });
      expect(ids(left.items).sort()).toEqual(ids([rows.laggingOut, rows.atTo]).sort());
      expect(await log.prune(new Date(to + MIN).toISOString())).toEqual({ deleted: 2 });
    });
  });

  describeLogSearchContract(ctx);
}

/**
 * Search, on its own so test/log-search.test.ts can hold a store without the full-text index
 * (KEYRELAY_LOG_SEARCH=false) to the same expectations.
 */
export function describeLogSearchContract(ctx: LogContext): void {
  let log: LogStore;
  let acct: string;
  beforeEach(() => {
    log = ctx.store();
    acct = `acct-${newId()}`;
  });

  describe('search', () => {
    const body = (text: string) => JSON.stringify({ messages: [{ role: 'user', content: text }] });
    async function seed() {
      const t = Date.parse('2026-04-01T00:00:00.000Z');
      const rows = [
        makeLogRow({
          account_id: acct,
          at: t,
          model: 'gpt-5-mini',
          request_body: body('Find the tabby cat'),
        }),
        makeLogRow({
          account_id: acct,
          at: t + 1,
          provider: 'anthropic',
          path: '/v1/messages',
          model: 'claude-haiku-4-5',
          end_user: 'alice@example.com',
          session: 'checkout-flow-7',
          request_body: body('Résumé des données'),
          response_body: 'data: {"delta":{"text":"zebra crossing"}}\n\n',
        }),
        makeLogRow({ account_id: acct, at: t + 2, model: null, request_body: null, response_body: null }),
        // Another account's row with the same words: never found from this one.
        makeLogRow({ account_id: `other-${acct}`, at: t + 3, request_body: body('tabby cat zebra') }),
      ];
      await log.insertBatch(rows);
      return rows;
    }
    const find = async (search: string, more: Partial<RequestFilter> = {}) =>
      ids((await log.listRequests({ account_id: acct, search, ...more }, { limit: 50 })).items);

    it('finds rows by words in the model, path, end user, session and bodies, in this account only', async () => {
      const [a, b] = await seed();
      expect(await find('tabby')).toEqual([a!.id]);
      expect(await find('TABBY cat')).toEqual([a!.id]);
      expect(await find('zebra')).toEqual([b!.id]); // in a streamed response body
      expect(await find('haiku')).toEqual([b!.id]);
      expect(await find('gpt-5-mini')).toEqual([a!.id]);
      expect(await find('alice@example.com')).toEqual([b!.id]);
      expect(await find('checkout')).toEqual([b!.id]);
      expect(await find('messages')).toContain(b!.id); // path /v1/messages
      expect(await find('données')).toEqual([b!.id]);
      expect(await find('tabby zebra')).toEqual([]); // every word must match
      expect((await find('tabby OR zebra')).sort()).toEqual([a!.id, b!.id].sort()); // or either side of OR
      expect((await find('tabby cat OR crossing zebra')).sort()).toEqual([a!.id, b!.id].sort());
      expect(await find('tabby or zebra')).toEqual([]); // only capital OR is the operator
      expect(await find('OR')).toEqual([]); // an operator alone is a word: no row says "or"
      expect(await find('nothing-like-this')).toEqual([]);
    });

    it('combines with the other filters, and treats query syntax as plain words', async () => {
      const [a] = await seed();
      expect(await find('cat', { provider: 'openai' })).toEqual([a!.id]);
      expect(await find('cat', { provider: 'anthropic' })).toEqual([]);
      expect(await find('"tabby" NEAR( -cat *')).toEqual([]);
      expect(await find('tabby AND cat')).toEqual([a!.id]);
      expect(await find('tabby*')).toEqual([a!.id]);
      // Only punctuation: no words, so no search condition at all.
      expect((await find('***')).length).toBe(3);
    });

    it('pages through many matches newest first, with other rows in between', async () => {
      const t = Date.parse('2026-05-01T00:00:00.000Z');
      const rows = Array.from({ length: 70 }, (_, i) =>
        makeLogRow({
          account_id: acct,
          at: t + i,
          request_body: body(i % 7 === 3 ? 'plain words' : `wombat ${i}`),
        }),
      );
      await log.insertBatch(rows);
      const want = newestFirst(rows.filter((_, i) => i % 7 !== 3)).map((r) => r.id);
      const first = await log.listRequests({ account_id: acct, search: 'wombat' }, { limit: 50 });
      expect(ids(first.items)).toEqual(want.slice(0, 50));
      const second = await log.listRequests(
        { account_id: acct, search: 'wombat' },
        { limit: 50, cursor: first.next_cursor },
      );
      expect(ids(second.items)).toEqual(want.slice(50));
      expect(second.next_cursor).toBeNull();
    });

    it('finds a stream by its search text, words whole, never shows that text, and forgets it with the bodies', async () => {
      const old = Date.parse('2003-03-03T00:00:00.000Z');
      const frame = (text: string) => `data: {"choices":[{"delta":{"content":"${text}"}}]}\n\n`;
      const r = makeLogRow({
        account_id: acct,
        at: old,
        stream: true,
        response_body: frame('Kooka') + frame('burra laughs'),
        response_search_text: 'data: {"id":"chatcmpl-9zY"}\nKookaburra laughs',
      });
      await log.insertBatch([r]);
      expect(await find('kookaburra')).toEqual([r.id]); // split across the frames
      expect(await find('chatcmpl-9zY laughs')).toEqual([r.id]);
      const { response_search_text: _, ...shown } = r;
      expect(await log.getRequest(acct, r.id)).toEqual(shown);
      await log.prune('1990-01-01T00:00:00.000Z', [
        { account_id: acct, before: new Date(old + 1).toISOString() },
      ]);
      expect(await find('kookaburra')).toEqual([]);
      expect(await log.getRequest(acct, r.id)).toEqual({ ...shown, request_body: null, response_body: null });
      await log.prune(new Date(old + 1).toISOString());
      expect(await log.getRequest(acct, r.id)).toBeNull();
      expect(await find('gpt')).not.toContain(r.id);
    });

    it('forgets body text once retention strips the bodies', async () => {
      const old = Date.parse('2002-02-02T00:00:00.000Z');
      const r = makeLogRow({ account_id: acct, at: old, request_body: body('quokka sighting') });
      await log.insertBatch([r]);
      expect(await find('quokka')).toEqual([r.id]);
      await log.prune('1990-01-01T00:00:00.000Z', [
        { account_id: acct, before: new Date(old + 1).toISOString() },
      ]);
      expect(await find('quokka')).toEqual([]);
      expect(await find('gpt')).toContain(r.id); // the model is still searchable
    });
  });
}
