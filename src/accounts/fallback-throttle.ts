/**
 * Login throttling that survives a Redis outage: while the shared (Redis) throttle fails, each instance
 * throttles on its own memory instead of refusing every login. Limits per instance are the same, so an
 * attacker gains at most a factor of the instance count for the length of the outage.
 */
import type { Logger } from 'pino';
import type { LoginThrottle, ThrottleAttempt, ThrottleSubject } from './throttle.js';

export class FallbackLoginThrottle implements LoginThrottle {
  private degraded = false;

  constructor(
    private shared: LoginThrottle,
    private local: LoginThrottle,
    private log: Pick<Logger, 'warn' | 'info'>,
  ) {}

  async attempt(s: ThrottleSubject): Promise<ThrottleAttempt> {
    try {
      const r = await this.shared.attempt(s);
      if (this.degraded) this.log.info({}, 'shared login throttle is back');
      this.degraded = false;
      return r;
    } catch (err) {
      if (!this.degraded)
        this.log.warn({ err }, 'shared login throttle unavailable; throttling per instance');
      this.degraded = true;
      const r = await this.local.attempt(s);
      return r.allowed ? { allowed: true, attemptId: `local:${r.attemptId}` } : r;
    }
  }

  async recordSuccess(s: ThrottleSubject, attemptId: string): Promise<void> {
    if (attemptId.startsWith('local:')) return this.local.recordSuccess(s, attemptId.slice('local:'.length));
    try {
      await this.shared.recordSuccess(s, attemptId);
    } catch {
      // The window expires by itself; a success that could not be recorded only delays the reset.
    }
  }

  async close(): Promise<void> {
    await this.shared.close();
    await this.local.close();
  }
}
