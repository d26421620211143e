/**
 * A TCP relay that a test can cut, to play a database or Redis outage without touching the real server:
 * keyrelay connects to the relay's port, the relay to the real service. `cut('refuse')` destroys every
 * relayed connection and resets new ones at once (a server that is down); `cut('blackhole')` keeps
 * connections open but relays nothing (a network partition: only timeouts notice). `restore()` relays again;
 * connections held by a blackhole are reset then, as they would be after a long partition.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

export type FaultMode = 'open' | 'refuse' | 'blackhole';

export interface FaultProxy {
  port: number;
  /** The relay's address in place of the target's in a URL, e.g. `postgres://u@127.0.0.1:<port>/db`. */
  host: string;
  mode(): FaultMode;
  cut(mode?: Exclude<FaultMode, 'open'>): void;
  restore(): void;
  /** Connections accepted since start (a reconnecting client shows up here). */
  accepted(): number;
  close(): Promise<void>;
}

interface Pair {
  client: Socket;
  upstream: Socket | null;
}

export async function startFaultProxy(target: { host: string; port: number }): Promise<FaultProxy> {
  let mode: FaultMode = 'open';
  let accepted = 0;
  const pairs = new Set<Pair>();

  const drop = (pair: Pair) => {
    pairs.delete(pair);
    pair.client.destroy();
    pair.upstream?.destroy();
  };

  const relay = (pair: Pair) => {
    const upstream = connect(target.port, target.host);
    pair.upstream = upstream;
    upstream.setNoDelay(true);
    pair.client.setNoDelay(true);
    // Data events rather than pipe(): a blackhole must be able to swallow bytes mid-connection.
    pair.client.on('data', (d: Buffer) => {
      if (mode === 'open') upstream.write(d);
    });
    upstream.on('data', (d: Buffer) => {
      if (mode === 'open') pair.client.write(d);
    });
    upstream.on('error', () => drop(pair));
    upstream.on('close', () => drop(pair));
  };

  const server: Server = createServer((client) => {
    accepted++;
    const pair: Pair = { client, upstream: null };
    client.on('error', () => drop(pair));
    client.on('close', () => drop(pair));
    if (mode === 'refuse') {
      client.resetAndDestroy();
      return;
    }
    pairs.add(pair);
    if (mode === 'open') relay(pair);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('fault proxy has no port');

  return {
    port: address.port,
    host: `127.0.0.1:${address.port}`,
    mode: () => mode,
    cut(next = 'refuse') {
      mode = next;
      if (next === 'refuse') for (const pair of [...pairs]) drop(pair);
    },
    restore() {
      if (mode === 'blackhole') for (const pair of [...pairs]) drop(pair);
      mode = 'open';
    },
    accepted: () => accepted,
    async close() {
      for (const pair of [...pairs]) drop(pair);
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
