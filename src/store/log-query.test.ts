import { describe, expect, it } from 'vitest';
import { percentileCont, sortedNumbers } from './log-query.js';

describe('sortedNumbers', () => {
  it('reads group_concat text, one value or many, in any notation, sorted', () => {
    expect([...sortedNumbers('42')]).toEqual([42]);
    expect([...sortedNumbers('3,1.5,2')]).toEqual([1.5, 2, 3]);
    expect([...sortedNumbers('1e+21,0.33333333333333331,-0,7')]).toEqual([-0, 0.3333333333333333, 7, 1e21]);
    expect(percentileCont(sortedNumbers('10,40,20,30'), 0.5)).toBe(25);
  });
});
