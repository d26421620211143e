import { describe, expect, it } from 'vitest';
import { passwordProblem } from './password.js';

const rule = { min_length: 10, max_length: 256 };

describe('passwordProblem', () => {
  it('takes a passphrase from the minimum to the maximum, spaces inside included', () => {
    expect(passwordProblem('correct horse', rule)).toBeNull();
    expect(passwordProblem('x'.repeat(256), rule)).toBeNull();
  });

  it('names what is wrong: too long, too short, or only spaces at the ends making up the length', () => {
    expect(passwordProblem('x'.repeat(300), rule)).toBe('At most 256 characters; this one has 300.');
    expect(passwordProblem(' '.repeat(10), rule)).toMatch(/^At least 10 characters, not counting spaces/);
    expect(passwordProblem('  abcdefgh  ', rule)).toMatch(/^At least 10/);
    expect(passwordProblem('', rule)).toBeNull();
  });
});
