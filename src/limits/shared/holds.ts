/**
 * This instance's side of the holds every instance shares through Redis (redis-holds.ts): a hard budget's
 * reservation and an in-flight slot taken by one script, atomically across instances; most reservations
 * taken from the instance's lease of the budget instead, with no round trip (leases.ts); the expiry of
 * running holds pushed forward; and, while Redis fails, this instance's own counts (local/holds.ts).
 */
import type { RequestLogRow } from '../../types.js';
import type { KeyRecord } from '../../store/types.js';
import type { LocalHolds } from '../local/holds.js';
import { toNanos, type SpendLedger } from '../local/spend.js';
import { budgetRefusal, budgetWait, concurrencyRefusal } from '../refusals.js';
import type { Admission, Hold } from '../types.js';
import { LeaseBook, type Lease } from './leases.js';
import type { SharedHolds } from './redis-holds.js';

export interface SharedHoldOptions {
  /** Prefix of this instance's hold ids (its leases are `<prefix>lease.…`). */
  prefix: string;
  /** How long a hold outlives its instance's last refresh. */
  ttlMs: number;
  now: () => number;
  onError: (err: unknown, msg: string) => void;
  /** Counts a finished request's cost in this instance's ledger (pushed by the counters' sync). */
  record: (row: RequestLogRow) => void;
}

export class SharedHoldBook {
  /** Redis failed a hold: admission goes local until a refresh gets an answer again. */
  failing = false;
  private readonly leases: LeaseBook;
  /** Shared holds still running here, per key: their expiry is pushed forward while they run. */
  private readonly running = new Map<string, Set<string>>();
  private lastRefresh = 0;

  constructor(
    private readonly holds: SharedHolds,
    private readonly spend: SpendLedger,
    private readonly local: LocalHolds,
    private readonly o: SharedHoldOptions,
  ) {
    this.leases = new LeaseBook(holds, `${o.prefix}lease.`, o.ttlMs, o.now, (err, lease) =>
      this.leaseFailed(err, lease),
    );
  }

  /**
   * Takes the hold: a reservation without a slot from the key's lease when the lease covers it, else (or
   * the rest of it) in Redis.
   */
  admit(key: KeyRecord, hold: Hold, undo: () => void): Admission | Promise<Admission> {
    const s = hold.spend;
    if (s !== null && !hold.slot && s.status === 'loaded') {
      const taken = this.leases.take(key.id, s, toNanos(key.budget_usd!), hold.nanos);
      if (taken) {
        hold.lease = taken.lease;
        hold.leased = taken.part;
        if (taken.part === hold.nanos) return hold;
      }
    }
    return this.admitShared(key, hold, undo);
  }

  /** Takes the slot and reservation in Redis, atomically across instances; on a Redis failure, locally. */
  private async admitShared(key: KeyRecord, hold: Hold, undo: () => void): Promise<Admission> {
    const s = hold.spend;
    if (s && s.status !== 'loaded') await this.spend.loaded(s);
    const budget = s ? toNanos(key.budget_usd!) : null;
    try {
      const reply = await this.holds.admit(
        {
          keyId: key.id,
          holdId: hold.id,
          budget,
          amount: hold.nanos - hold.leased,
          period: s?.period ?? 'month',
          start: s?.start ?? 0,
          end: s?.end ?? 0,
          seed: s?.total ?? 0,
          slots: hold.slot ? key.max_concurrent : null,
        },
        this.o.now(),
        this.o.ttlMs,
      );
      if (s) s.total = Math.max(s.total, reply.spent + s.pending);
      if (!reply.ok) {
        this.returnLeased(hold);
        undo();
        if (reply.reason === 'slots') return concurrencyRefusal(key);
        return budgetRefusal(
          key,
          s!.period,
          budgetWait(reply.spent, hold.nanos, budget!, s!.end, this.o.now()),
        );
      }
    } catch (err) {
      this.failed(err);
      this.returnLeased(hold);
      return this.local.admit(key, hold, undo);
    }
    hold.shared = true;
    let ids = this.running.get(key.id);
    if (!ids) this.running.set(key.id, (ids = new Set()));
    ids.add(hold.id);
    return hold;
  }

  /** Releases a hold taken here (in Redis, or from a lease) and counts the request's `cost` (USD). */
  settle(hold: Hold, row: RequestLogRow | null, cost: number, now: number): void {
    const lease = hold.lease;
    if (lease && !hold.shared) {
      // The cost stays in the lease (still held in Redis) until its renewal moves it into the spend.
      this.leases.settle(lease, hold.leased, lease.dead ? 0 : toNanos(cost));
      if (!lease.dead) lease.spend.total += toNanos(cost);
      else {
        lease.spend.reserved -= hold.leased;
        if (row) this.o.record(row);
      }
      return;
    }
    const ids = this.running.get(hold.keyId);
    ids?.delete(hold.id);
    if (ids?.size === 0) this.running.delete(hold.keyId);
    const s = hold.spend;
    // A shared hard budget gets the cost in the same script that drops the reservation; anything else (a
    // slot of a key with a soft budget) counts its cost through the periodic sync.
    if (!s) {
      if (row) this.o.record(row);
      // A slot without a reservation: released in Redis at no cost.
      return void this.holds
        .settle({ keyId: hold.keyId, holdId: hold.id, period: 'month', start: 0, end: now }, 0, 0, now)
        .catch((err: unknown) => this.failed(err));
    }
    this.holds
      .settle(
        { keyId: hold.keyId, holdId: hold.id, period: s.period, start: s.start, end: s.end },
        toNanos(cost),
        s.total,
        now,
      )
      .then(
        (total) => {
          if (row) this.spend.addSettled(hold.keyId, row.created_at, cost, total);
          // Part of the reservation was the lease's: freed only now that Redis has the cost.
          this.returnLeased(hold);
        },
        (err: unknown) => {
          // Counted through the sync instead; the reservation in Redis lapses with its TTL.
          this.failed(err);
          if (row) this.o.record(row);
          this.returnLeased(hold);
        },
      );
  }

  /** Gives back the part of a hold's reservation taken from its lease (refused, or going local). */
  private returnLeased(hold: Hold): void {
    if (hold.lease === null) return;
    this.leases.settle(hold.lease, hold.leased, 0);
    if (hold.lease.dead) hold.lease.spend.reserved -= hold.leased;
    hold.lease = null;
    hold.leased = 0;
  }

  /**
   * A lease Redis could not renew: its costs go to the ledger (pushed by the counters' sync once Redis
   * answers), its requests in flight count as this instance's reservations, and admission goes local.
   */
  private leaseFailed(err: unknown, lease: Lease): void {
    this.failed(err);
    lease.spend.pending += lease.spent;
    lease.spent = 0;
    lease.spend.reserved += lease.open;
  }

  private failed(err: unknown): void {
    if (!this.failing) this.o.onError(err, 'limit holds not shared through Redis; enforcing per instance');
    this.failing = true;
  }

  /**
   * The sync's turn: pushes the expiry of this instance's running holds forward (a third of their TTL at a
   * time), then renews the leases.
   */
  async sync(now: number): Promise<void> {
    if (now - this.lastRefresh >= this.o.ttlMs / 3) {
      this.lastRefresh = now;
      try {
        await this.holds.refresh(
          new Map([...this.running].map(([k, ids]) => [k, [...ids]])),
          now + this.o.ttlMs,
        );
        // Redis answers again: new holds are shared again.
        if (this.failing) this.o.onError(null, 'limit holds shared through Redis again');
        this.failing = false;
      } catch (err) {
        this.failed(err);
      }
    }
    await this.leases.renewAll();
  }

  /** Gives every lease back (shutdown, after requests in flight ended). */
  close(): Promise<void> {
    return this.leases.releaseAll();
  }
}
