import { useCallback, useEffect, useEffectEvent, useRef, useState } from 'react';

export interface AsyncState<T> {
  data: T | undefined;
  error: Error | undefined;
  loading: boolean;
  reload: () => void;
}

/** Runs `fn` whenever `deps` change; a stale answer (deps changed meanwhile) is dropped. */
export function useAsync<T>(fn: () => Promise<T>, deps: readonly unknown[]): AsyncState<T> {
  const [state, setState] = useState<{ data?: T; error?: Error; loading: boolean }>({ loading: true });
  const [tick, setTick] = useState(0);
  const seq = useRef(0);
  // The caller's latest fn; it runs when the caller's deps change, not when a new closure is passed.
  const run = useEffectEvent(fn);
  useEffect(() => {
    const mine = ++seq.current;
    setState((s) => ({ data: s.data, loading: true }));
    run().then(
      (data) => {
        if (mine === seq.current) setState({ data, loading: false });
      },
      (e: unknown) => {
        if (mine === seq.current)
          setState({ error: e instanceof Error ? e : new Error(String(e)), loading: false });
      },
    );
    // The deps are the caller's (like useEffect's own): the rule cannot see through the spread.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [...deps, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { data: state.data, error: state.error, loading: state.loading, reload };
}
