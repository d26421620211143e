/**
 * last_used_at without a write per request: the proxy marks keys in memory and a timer writes the latest
 * time per key in one coalesced call.
 */
import type { ConfigStore } from '../store/types.js';

export class LastUsedTracker {
  private pending = new Map<string, string>();
  private timer: NodeJS.Timeout;

  constructor(
    private store: Pick<ConfigStore, 'touchKeys'>,
    intervalMs: number,
    private onError: (err: unknown) => void,
  ) {
    this.timer = setInterval(() => void this.flush(), intervalMs);
    this.timer.unref();
  }

  mark(keyId: string, at: string): void {
    this.pending.set(keyId, at);
  }

  async flush(): Promise<void> {
    if (this.pending.size === 0) return;
    const batch = this.pending;
    this.pending = new Map();
    try {
      await this.store.touchKeys(batch);
    } catch (err) {
      // Put back what a newer mark has not superseded, so the next tick retries it.
      for (const [id, at] of batch) if (!this.pending.has(id)) this.pending.set(id, at);
      this.onError(err);
    }
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }
}
