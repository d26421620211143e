/**
 * Budget leases: how a hard budget shared through Redis admits most requests without a round trip. An
 * instance reserves a share of a key's budget in Redis as one hold (the lease) and admits its requests'
 * reservations from it in memory; the costs they settle stay inside the lease until its next renewal, which
 * moves them into the period's spend and resizes the lease in one script (redis-holds.ts, LEASE_SCRIPT). So
 * at every moment Redis holds, in spend or in this lease, at least what the instance's requests have spent
 * or may still spend, and admission stays exact across instances: a lease is a reservation like any other.
 *
 * A lease asks for what its requests in flight hold plus four times the reservations of the last interval,
 * and gets at most a quarter of the room the other instances leave; a request that does not fit in its lease
 * goes to Redis on its own (one script, checked against the whole room), which is how admission works near
 * the budget. Leases are renewed by the
 * limiter's sync (every 200 ms) and at once when a request did not fit; a key idle for one interval with
 * nothing in flight gives its lease back.
 *
 * During a renewal the lease is used only up to what the renewal keeps in any case (`cap`), so a lease that
 * shrinks never holds less in Redis than its requests in flight were admitted against.
 */
import type { SharedHolds } from './redis-holds.js';
import type { SpendState } from '../local/spend.js';

export interface Lease {
  readonly keyId: string;
  readonly id: string;
  /** The period's spend state (replaced if the ledger dropped and re-created it meanwhile). */
  spend: SpendState;
  /** Budget in nanodollars, as of the last admission. */
  budget: number;
  /** Nanodollars held in Redis. */
  granted: number;
  /** Reservations of requests admitted under the lease, still in flight. */
  open: number;
  /** Costs settled under the lease and not yet moved to the period's spend; `moving`: the renewal's. */
  spent: number;
  moving: number;
  /** While a renewal runs: the most that open + spent may reach (what the renewal keeps in any case). */
  cap: number | null;
  /**
   * Reservations asked for (under the lease or not) since the last sync's turn; none during a whole turn
   * and nothing in flight: the lease is given back.
   */
  demand: number;
  renewing: Promise<void> | null;
  /** Redis failed it: no more admissions; what is still in flight settles into the ledger. */
  dead: boolean;
}

const ASK_FACTOR = 4;

export class LeaseBook {
  private readonly leases = new Map<string, Lease>();

  constructor(
    private readonly holds: SharedHolds,
    private readonly leaseId: string,
    private readonly ttlMs: number,
    private readonly now: () => number,
    private readonly onFailure: (err: unknown, lease: Lease) => void,
  ) {}

  /**
   * Reserves `nanos` for a request from the key's lease in this period: all of it when it fits, else what
   * the lease has left (the request then asks Redis for the rest on its own, and the lease is renewed at
   * once). Null when the lease failed.
   */
  take(
    keyId: string,
    spend: SpendState,
    budget: number,
    nanos: number,
  ): { lease: Lease; part: number } | null {
    // Per period: a lease of the period before keeps its costs and requests and is given back when idle.
    const name = `${keyId}.${spend.start}`;
    let lease = this.leases.get(name);
    if (!lease) {
      lease = {
        keyId,
        id: `${this.leaseId}${name}`,
        spend,
        budget,
        granted: 0,
        open: 0,
        spent: 0,
        moving: 0,
        cap: null,
        demand: 0,
        renewing: null,
        dead: false,
      };
      this.leases.set(name, lease);
    }
    if (lease.dead) return null;
    lease.spend = spend;
    lease.budget = budget;
    lease.demand += nanos;
    const part = Math.max(0, Math.min(nanos, this.limitOf(lease) - lease.open - lease.spent));
    lease.open += part;
    if (part < nanos && lease.renewing === null) void this.renew(lease, this.wantOf(lease, nanos));
    return { lease, part };
  }

  /**
   * A request's part of `lease` is released: its reservation, and the cost kept for the renewal (0 when
   * the cost went to Redis with the rest of the request's reservation, or the lease failed).
   */
  settle(lease: Lease, nanos: number, cost: number): void {
    lease.open -= nanos;
    lease.spent += cost;
  }

  /** The sync's turn: every lease renewed (resized to its demand, costs moved), idle ones given back. */
  async renewAll(): Promise<void> {
    const running: Promise<void>[] = [];
    for (const lease of this.leases.values()) {
      if (lease.dead) {
        if (lease.open === 0) this.forget(lease);
        continue;
      }
      const idle = lease.demand === 0 && lease.open === 0;
      if (idle && lease.granted === 0 && lease.spent === 0) {
        this.forget(lease);
        continue;
      }
      running.push(lease.renewing ?? this.renew(lease, idle ? 0 : this.wantOf(lease, 0)));
      lease.demand = 0;
    }
    await Promise.all(running);
  }

  /** Gives every lease back (shutdown, after requests in flight ended); their costs reach the spend. */
  async releaseAll(): Promise<void> {
    await Promise.all([...this.leases.values()].map((l) => l.renewing ?? Promise.resolve()));
    await Promise.all([...this.leases.values()].filter((l) => !l.dead).map((l) => this.renew(l, 0)));
  }

  private limitOf(lease: Lease): number {
    return lease.cap ?? lease.granted - lease.moving;
  }

  /** What its requests in flight hold, and room for four times the last interval's asks (or this one's). */
  private wantOf(lease: Lease, nanos: number): number {
    return lease.open + ASK_FACTOR * Math.max(lease.demand, nanos);
  }

  private forget(lease: Lease): void {
    const name = `${lease.keyId}.${lease.spend.start}`;
    if (this.leases.get(name) === lease) this.leases.delete(name);
  }

  private renew(lease: Lease, want: number): Promise<void> {
    const s = lease.spend;
    const cost = lease.spent;
    // Until the reply, open + spent stay within what the script keeps whatever the room: the lease's
    // current size less the costs it moves out, or less if it is asked to shrink, never below what is open.
    const keep = Math.max(lease.open, Math.min(lease.granted - cost, want));
    lease.spent = 0;
    lease.moving = cost;
    lease.cap = keep;
    const now = this.now();
    lease.renewing = this.holds
      .lease(
        {
          keyId: lease.keyId,
          leaseId: lease.id,
          budget: lease.budget,
          cost,
          seed: s.total,
          period: s.period,
          start: s.start,
          end: s.end,
          want,
          keep,
        },
        now,
        this.ttlMs,
      )
      .then(
        (reply) => {
          lease.granted = reply.granted;
          s.total = Math.max(s.total, reply.spent + s.pending);
          if (reply.granted === 0 && lease.open === 0 && lease.spent === 0) this.forget(lease);
        },
        (err: unknown) => {
          // What was moving is not in Redis' spend: it goes back to the lease, and the limiter takes
          // the lease's costs into its ledger (pushed by the counters' sync once Redis answers again).
          lease.spent += cost;
          lease.dead = true;
          this.onFailure(err, lease);
        },
      )
      .finally(() => {
        lease.moving = 0;
        lease.cap = null;
        lease.renewing = null;
      });
    return lease.renewing;
  }
}
