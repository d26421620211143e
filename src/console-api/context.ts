/** What every console route needs, built once in registerConsoleApi. */
import type { LoginThrottle } from '../accounts/throttle.js';
import type { SessionDeps } from '../accounts/sessions.js';
import type { Config } from '../config.js';
import type { KeyDeps } from '../keys/actions.js';
import type { KeyEventBus } from '../keys/events.js';
import type { ConfigStore, LogStore } from '../store/types.js';

export interface ConsoleDeps {
  config: Config;
  configStore: ConfigStore;
  logStore: LogStore;
  bus: KeyEventBus;
  throttle: LoginThrottle;
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
      idleMs: deps.config.sessionIdleMs,
      maxMs: deps.config.sessionMaxMs,
      now,
    },
    keys: { store: deps.configStore, bus: deps.bus, now },
  };
}
