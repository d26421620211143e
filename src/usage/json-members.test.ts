import { describe, expect, it } from 'vitest';
import { readTopLevelMembers } from './json-members.js';

const KEYS = ['usage', 'model'];

describe('readTopLevelMembers', () => {
  it('reads the named top-level members as JSON.parse would, skipping the rest unbuilt', () => {
    const text =
      ' {"id":"x","choices":[{"message":{"content":"a \\"usage\\": {} ] } [ \\\\","usage":1}}],' +
      '"model":"gpt-4o","usage":{"prompt_tokens":12,"completion_tokens":7},"n":-1.5e3,"t":true,"z":null}\n';
    const whole = JSON.parse(text) as Record<string, unknown>;
    expect(readTopLevelMembers(text, KEYS)).toEqual({ usage: whole.usage, model: whole.model });
  });

  it('keeps the last of a repeated key, like JSON.parse', () => {
    const text = '{"usage":{"a":1},"model":"m1","usage":{"a":2}}';
    expect(readTopLevelMembers(text, KEYS)).toEqual({ usage: { a: 2 }, model: 'm1' });
  });

  it('leaves absent members out, and reads an empty object', () => {
    expect(readTopLevelMembers('{"id":"x"}', KEYS)).toEqual({});
    expect(readTopLevelMembers('{ }', KEYS)).toEqual({});
  });

  it('gives up (null) where only a whole parse can tell', () => {
    for (const text of [
      '{"us\\u0061ge":{"a":1}}', // an escaped key may spell a wanted name
      '{"usage":{"a":1}', // cut short
      '{"usage":{"a":1}} x', // trailing text
      '{"usage":{"a":1},}', // trailing comma
      '{"usage":{"a":}}', // a wanted value that does not parse
      '[{"usage":{"a":1}}]', // not an object
      '{"choices":["unterminated]}',
      '',
    ])
      expect(readTopLevelMembers(text, KEYS), text).toBeNull();
  });
});
