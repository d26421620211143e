import { describe, expect, it } from 'vitest';
import { SpendLedger, toNanos } from './spend.js';

const DAY0 = Date.parse('2026-03-01T00:00:00Z');
const at = (ms: number) => new Date(DAY0 + ms).toISOString();
const flush = () => new Promise((r) => setImmediate(r));

function ledger(logged: number | Error = 0) {
  const loads: { keyId: string; since: string }[] = [];
  const errors: unknown[] = [];
  const l = new SpendLedger(
    (keyId, since) => {
      loads.push({ keyId, since });
      return logged instanceof Error ? Promise.reject(logged) : Promise.resolve(logged);
    },
    (err) => errors.push(err),
  );
  return { l, loads, errors };
}

describe('SpendLedger', () => {
  it('allows until the logged spend is loaded, then refuses at the budget until the period ends', async () => {
    const { l, loads } = ledger(4);
    expect(l.exceeded('k', 5, 'day', DAY0 + 1000)).toBeNull(); // starts the load, off this call's path
    expect(loads).toEqual([]);
    await flush();
    expect(loads).toEqual([{ keyId: 'k', since: at(0) }]);
    expect(l.exceeded('k', 5, 'day', DAY0 + 2000)).toBeNull();
    l.add('k', at(2000), 1);
    expect(l.exceeded('k', 5, 'day', DAY0 + 3000)).toBe(86_400 - 3);
    expect(loads).toHaveLength(1);
  });

  it('keeps costs recorded while the load runs', async () => {
    const { l } = ledger(4);
    l.exceeded('k', 5, 'month', DAY0);
    l.add('k', at(10), 1.5);
    await flush();
    expect(l.exceeded('k', 5, 'month', DAY0 + 20)).not.toBeNull();
  });

  it('starts a new period from the log again, ignoring costs of the old one', async () => {
    const { l, loads } = ledger(0);
    l.exceeded('k', 1, 'day', DAY0);
    await flush();
    l.add('k', at(0), 2);
    expect(l.exceeded('k', 1, 'day', DAY0 + 10)).not.toBeNull();
    const tomorrow = DAY0 + 86_400_000;
    expect(l.exceeded('k', 1, 'day', tomorrow)).toBeNull();
    l.add('k', at(5), 2); // a late row from yesterday
    await flush();
    expect(loads.map((x) => x.since)).toEqual([at(0), new Date(tomorrow).toISOString()]);
    expect(l.exceeded('k', 1, 'day', tomorrow + 1)).toBeNull();
  });

  it('retries a failed load after a pause, allowing meanwhile', async () => {
    const { l, loads, errors } = ledger(new Error('db down'));
    l.exceeded('k', 1, 'day', DAY0);
    await flush();
    expect(errors).toHaveLength(1);
    expect(l.exceeded('k', 1, 'day', DAY0 + 1000)).toBeNull();
    expect(loads).toHaveLength(1);
    l.exceeded('k', 1, 'day', DAY0 + 6000);
    await flush();
    expect(loads).toHaveLength(2);
  });

  it('adds in integer nanodollars, so many tiny costs sum exactly', async () => {
    const { l } = ledger(0);
    l.exceeded('k', 0.01, 'day', DAY0);
    await flush();
    for (let i = 0; i < 10_000; i++) l.add('k', at(1), 0.000001);
    expect(l.exceeded('k', 0.01, 'day', DAY0 + 1)).not.toBeNull();
    expect(toNanos(0.1 + 0.2)).toBe(300_000_000);
  });

  it('hands pending amounts to a sync with its estimate as the seed, and adopts the shared total', async () => {
    const { l } = ledger(3);
    l.exceeded('k', 10, 'day', DAY0);
    l.add('k', at(1), 1);
    expect(l.collect(DAY0 + 1)).toEqual([]); // not loaded yet: the seed would miss the log's spend
    await flush();
    const [d] = l.collect(DAY0 + 2);
    expect(d).toMatchObject({ keyId: 'k', period: 'day', delta: toNanos(1), seed: toNanos(4) });
    l.apply(d!, toNanos(10)); // other instances spent the rest
    expect(l.exceeded('k', 10, 'day', DAY0 + 3)).not.toBeNull();
  });
});
