/** The console's live tail read as a browser's EventSource reads it: its `request` events, and its end. */
import { request } from 'undici';
import { expect } from 'vitest';
import type { RequestSummary } from '../../src/store/types.js';

export interface Tail {
  rows: RequestSummary[];
  /** Whether the server ended the stream. */
  ended(): boolean;
  close(): void;
}

/** Opens the tail as a browser's EventSource does, and collects its `request` events. */
export async function openTail(base: string, cookie: string, query = ''): Promise<Tail> {
  const ac = new AbortController();
  const res = await request(`${base}/api/console/requests/tail${query}`, {
    headers: { cookie, accept: 'text/event-stream' },
    signal: ac.signal,
  });
  expect(res.statusCode).toBe(200);
  expect(res.headers['content-type']).toBe('text/event-stream; charset=utf-8');
  const rows: RequestSummary[] = [];
  let buffer = '';
  res.body.on('data', (chunk: Buffer) => {
    buffer += chunk.toString('utf8');
    let end: number;
    while ((end = buffer.indexOf('\n\n')) !== -1) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = event.split('\n').find((l) => l.startsWith('data: '));
      if (event.includes('event: request') && data) rows.push(JSON.parse(data.slice(6)) as RequestSummary);
    }
  });
  let ended = false;
  res.body.on('end', () => (ended = true));
  res.body.on('error', () => {});
  return { rows, ended: () => ended, close: () => ac.abort() };
}

export const seen = (tail: Tail, id: string) => () =>
  Promise.resolve(tail.rows.find((r) => r.id === id) ? true : undefined);
