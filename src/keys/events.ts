/**
 * Key changes (revoke, roll, expiry change) must reach every instance's verification cache. Locally the bus
 * calls listeners at once; with Redis (src/keys/redis-bus.ts) it also publishes to the other instances.
 */
export type KeyEvent = { type: 'key_changed'; key_id: string; hash?: string } | { type: 'flush_all' };

export interface KeyEventBus {
  publish(e: KeyEvent): Promise<void>;
  subscribe(listener: (e: KeyEvent) => void): void;
  close(): Promise<void>;
}

export class LocalKeyEventBus implements KeyEventBus {
  private listeners: ((e: KeyEvent) => void)[] = [];
  publish(e: KeyEvent): Promise<void> {
    for (const l of this.listeners) l(e);
    return Promise.resolve();
  }
  subscribe(listener: (e: KeyEvent) => void): void {
    this.listeners.push(listener);
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}
