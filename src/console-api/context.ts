/** What every console route needs, built once in registerConsoleApi. */
import type { LoginThrottle } from '../accounts/throttle.js';
import { SESSION_IDLE_MS, SESSION_MAX_MS, type SessionDeps } from '../accounts/sessions.js';
import type { Config } from '../config.js';
import type { KeyDeps } from '../keys/actions.js';
import type { KeyEventBus } from '../keys/events.js';
import type { TailBus } from '../log/tail.js';
import type { Metrics } from '../metrics.js';
import type { ConfigStore, KeyRateStatus, KeyRecord, LogStore } from '../store/types.js';

export interface ConsoleDeps {
  config: Config;
  configStore: ConfigStore;
  logStore: LogStore;
  bus: KeyEventBus;
  throttle: LoginThrottle;
  /** New log rows as they are written (the request log's live tail); absent, the tail answers 404. */
  tail?: TailBus;
  /** The server's metrics, for the reconciliation's difference and errors; absent in tests that need none. */
  metrics?: Metrics;
  /**
   * How much of a key's rpm and tpm limits is in use now, as this instance's limiter counts it (with Redis,
   * every instance's); absent (a console without a proxy), the Keys page shows the limits alone.
   */
  rateStatus?: (key: KeyRecord) => Promise<KeyRateStatus | null>;
  /** Clock for sessions and key expiry (tests move it forward); the real time by default. */
  now?: () => Date;
}

export interface ConsoleContext extends ConsoleDeps {
  now: () => Date;
  sessions: SessionDeps;
  keys: KeyDeps;
}

export function buildContext(deps: ConsoleDeps): ConsoleContext {
  const now = deps.now ?? (() => new Date());
  return {
    ...deps,
    now,
    sessions: {
      store: deps.configStore,
      idleMs: deps.config.sessionIdleMs ?? SESSION_IDLE_MS,
      maxMs: deps.config.sessionMaxMs ?? SESSION_MAX_MS,
      now,
    },
    keys: { store: deps.configStore, bus: deps.bus, now },
  };
}
