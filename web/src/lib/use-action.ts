import { useCallback, useState } from 'react';

export interface Action<E> {
  /** True while a `run` is in flight: disable the button that started it. */
  busy: boolean;
  /** What the last run failed with (as `toError` put it), or what the component set itself; null when none. */
  error: E | null;
  setError: (error: E | null) => void;
  /** Clears the error, runs `fn`, and on a throw keeps `toError(err)`; busy from start to end either way. */
  run: (fn: () => Promise<void>) => Promise<void>;
}

const messageOf = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** The busy / error / try / finally of a button that calls the API, once. */
export function useAction(): Action<string>;
export function useAction<E>(toError: (err: unknown) => E): Action<E>;
export function useAction<E>(toError?: (err: unknown) => E): Action<E | string> {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<E | string | null>(null);
  const map = toError ?? messageOf;
  const run = useCallback(
    async (fn: () => Promise<void>) => {
      setBusy(true);
      setError(null);
      try {
        await fn();
      } catch (err) {
        setError(map(err));
      } finally {
        setBusy(false);
      }
    },
    [map],
  );
  return { busy, error, setError, run };
}
