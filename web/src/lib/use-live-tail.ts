import { useEffect, useRef, useState } from 'react';
import { currentOrg, type RequestQuery, type RequestSummary } from '../api.js';

/** New rows kept on screen at most while live; older ones are a reload away. */
const LIVE_ROWS_MAX = 500;

/** The list's filters the tail applies itself; search, properties and time ranges it cannot. */
const TAIL_FILTERS = ['key_id', 'provider', 'model', 'status', 'outcome', 'end_user', 'session'] as const;

/** Why the current filters cannot be followed live, or null when they can. */
export function liveProblem(q: RequestQuery, custom: boolean): string | null {
  if (q.q) return 'Live does not follow a search: clear it to go live.';
  if (q.property) return 'Live does not follow a property filter: clear it to go live.';
  if (custom) return 'Live shows new requests: pick a recent time range instead of a custom one.';
  // New rows arrive newest first, which only that order can show.
  if (q.sort) return 'Live shows new requests newest first: sort by time to go live.';
  return null;
}

/**
 * The log's live tail (GET /api/console/requests/tail, server-sent events) while `on`: new rows first. Paused,
 * rows wait in `pending` and are shown on resume. The browser's EventSource reconnects by itself.
 */
export function useLiveTail(on: boolean, q: RequestQuery) {
  const [rows, setRows] = useState<RequestSummary[]>([]);
  const [pending, setPending] = useState<RequestSummary[]>([]);
  const [paused, setPaused] = useState(false);
  const [connected, setConnected] = useState(false);
  const pausedRef = useRef(paused);
  pausedRef.current = paused;
  const qs = new URLSearchParams();
  for (const k of TAIL_FILTERS) if (q[k]) qs.set(k, String(q[k]));
  // An EventSource sends no headers: the organization the other calls name in x-keyrelay-org goes here.
  const org = currentOrg();
  if (org) qs.set('org', org);
  const url = `/api/console/requests/tail${qs.size ? `?${qs.toString()}` : ''}`;

  useEffect(() => {
    setRows([]);
    setPending([]);
    setPaused(false);
    if (!on) return;
    const source = new EventSource(url);
    source.onopen = () => setConnected(true);
    source.onerror = () => setConnected(false);
    source.addEventListener('request', (e) => {
      const row = JSON.parse((e as MessageEvent<string>).data) as RequestSummary;
      const add = (list: RequestSummary[]) => [row, ...list].slice(0, LIVE_ROWS_MAX);
      if (pausedRef.current) setPending(add);
      else setRows(add);
    });
    return () => {
      source.close();
      setConnected(false);
    };
  }, [on, url]);

  return {
    rows,
    pending: pending.length,
    paused,
    connected,
    pause: () => setPaused(true),
    resume: () => {
      setRows((r) => [...pending, ...r].slice(0, LIVE_ROWS_MAX));
      setPending([]);
      setPaused(false);
    },
  };
}
