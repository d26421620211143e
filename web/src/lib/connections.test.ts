import { describe, expect, it } from 'vitest';
import { closeCodeText, groupByConnection } from './connections.js';

const row = (id: string, method: string, connection_id: string | null = null) => ({
  id,
  method,
  connection_id,
});

describe('groupByConnection', () => {
  it('nests each socket row’s responses under it and leaves other rows in log order', () => {
    const rows = [
      row('9', 'POST'),
      row('8', 'GET', '5'), // socket 5, written when it closed
      row('7', 'WS', '5'),
      row('6', 'POST'),
      row('5b', 'WS', '5'),
      row('4', 'WS', '1'), // its socket is not on this page
    ];
    const lines = groupByConnection(rows.map((r) => (r.id === '8' ? { ...r, id: '5' } : r)));
    expect(lines.map((l) => [l.row.id, l.kind, l.responses])).toEqual([
      ['9', 'plain', 0],
      ['5', 'socket', 2],
      ['7', 'response', 0],
      ['5b', 'response', 0],
      ['6', 'plain', 0],
      ['4', 'response', 0],
    ]);
  });

  it('names close codes', () => {
    expect(closeCodeText(1006)).toBe('1006 (dropped)');
    expect(closeCodeText(4001)).toBe('4001');
    expect(closeCodeText(null)).toBe('—');
  });
});
