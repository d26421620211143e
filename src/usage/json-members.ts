/**
 * Locating one top-level member of a JSON object's text without parsing it, so it can be cut out while
 * every other byte stays as it was. Works on latin1-decoded text too (UTF-8 continuation bytes are never
 * JSON punctuation).
 */
import { findObjectEnd } from './normalize.js';

export interface MemberSpan {
  keyStart: number;
  valueStart: number;
  valueEnd: number; // exclusive
}

const isSpace = (c: number) => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;

function skipSpace(text: string, i: number): number {
  while (i < text.length && isSpace(text.charCodeAt(i))) i++;
  return i;
}

/** Index just past the string starting at `i` (a `"`), or -1. */
export function stringEnd(text: string, i: number): number {
  for (let j = i + 1; j < text.length; j++) {
    const c = text.charCodeAt(j);
    if (c === 0x5c) j++;
    else if (c === 0x22) return j + 1;
  }
  return -1;
}

function valueEnd(text: string, i: number): number {
  const c = text.charCodeAt(i);
  if (c === 0x22) return stringEnd(text, i);
  if (c === 0x7b || c === 0x5b) {
    const close = findObjectEnd(text, i);
    return close < 0 ? -1 : close + 1;
  }
  let j = i;
  while (j < text.length) {
    const d = text.charCodeAt(j);
    if (d === 0x2c || d === 0x7d || d === 0x5d || isSpace(d)) break;
    j++;
  }
  return j > i ? j : -1;
}

/** The member `key` of the object whose `{` is at `open`; null if absent or the text is malformed. */
export function findTopLevelMember(text: string, key: string, open: number): MemberSpan | null {
  const quoted = `"${key}"`;
  let i = open + 1;
  for (;;) {
    i = skipSpace(text, i);
    if (text.charCodeAt(i) !== 0x22) return null; // `}` (end) or malformed
    const keyStart = i;
    const keyEnd = stringEnd(text, i);
    if (keyEnd < 0) return null;
    i = skipSpace(text, keyEnd);
    if (text.charCodeAt(i) !== 0x3a) return null;
    const vStart = skipSpace(text, i + 1);
    const vEnd = valueEnd(text, vStart);
    if (vEnd < 0) return null;
    if (keyEnd - keyStart === quoted.length && text.startsWith(quoted, keyStart)) {
      return { keyStart, valueStart: vStart, valueEnd: vEnd };
    }
    i = skipSpace(text, vEnd);
    if (text.charCodeAt(i) !== 0x2c) return null;
    i++;
  }
}

/** `text` without the member, and without the comma that separated it from its neighbour. */
export function removeMember(text: string, span: MemberSpan): string {
  let before = span.keyStart - 1;
  while (before >= 0 && isSpace(text.charCodeAt(before))) before--;
  if (text.charCodeAt(before) === 0x2c) return text.slice(0, before) + text.slice(span.valueEnd);
  // First member: take the comma after it instead.
  let after = skipSpace(text, span.valueEnd);
  if (text.charCodeAt(after) === 0x2c) after = skipSpace(text, after + 1);
  return text.slice(0, span.keyStart) + text.slice(after);
}

/**
 * The values of the named top-level members of the JSON object `text` (the last of a repeated key, as
 * JSON.parse keeps it), each parsed alone; absent members are left out. Null when the text is not one
 * object from end to end, a key is escaped (it might spell a wanted name), or a wanted value does not
 * parse: the caller then parses the whole text. Other members' values are skipped over, not validated.
 */
export function readTopLevelMembers(text: string, keys: readonly string[]): Record<string, unknown> | null {
  let i = skipSpace(text, 0);
  if (text.charCodeAt(i) !== 0x7b) return null;
  const spans: Array<[string, number, number]> = [];
  let backslash = text.indexOf('\\');
  i = skipSpace(text, i + 1);
  if (text.charCodeAt(i) !== 0x7d) {
    for (;;) {
      if (text.charCodeAt(i) !== 0x22) return null;
      const keyEnd = skipString(text, i);
      if (keyEnd < 0) return null;
      if (backslash !== -1 && backslash < i) backslash = text.indexOf('\\', i);
      if (backslash !== -1 && backslash < keyEnd) return null;
      const key = wanted(text, i + 1, keyEnd - 1, keys);
      i = skipSpace(text, keyEnd);
      if (text.charCodeAt(i) !== 0x3a) return null;
      const vStart = skipSpace(text, i + 1);
      const vEnd = skipValue(text, vStart);
      if (vEnd < 0) return null;
      if (key !== null) spans.push([key, vStart, vEnd]);
      i = skipSpace(text, vEnd);
      const c = text.charCodeAt(i);
      if (c === 0x7d) break;
      if (c !== 0x2c) return null;
      i = skipSpace(text, i + 1);
    }
  }
  if (skipSpace(text, i + 1) !== text.length) return null;
  const out: Record<string, unknown> = {};
  try {
    for (const [key, start, end] of spans) out[key] = JSON.parse(text.slice(start, end)) as unknown;
  } catch {
    return null;
  }
  return out;
}

/** The one of `keys` that text[start, end) spells, or null; compared in place, no slice. */
function wanted(text: string, start: number, end: number, keys: readonly string[]): string | null {
  for (const key of keys) if (key.length === end - start && text.startsWith(key, start)) return key;
  return null;
}

/** Index just past the string at `i` (a `"`), or -1: jumps quote to quote rather than byte by byte. */
function skipString(text: string, i: number): number {
  for (let from = i + 1; ;) {
    const q = text.indexOf('"', from);
    if (q < 0) return -1;
    let b = q - 1;
    while (text.charCodeAt(b) === 0x5c) b--;
    if ((q - 1 - b) % 2 === 0) return q + 1; // an even run of backslashes: the quote is not escaped
    from = q + 1;
  }
}

const STRUCTURE = /["[\]{}]/g;

/** Index just past the value at `i`, jumping from one bracket or quote to the next; -1 if malformed. */
function skipValue(text: string, i: number): number {
  const c = text.charCodeAt(i);
  if (c === 0x22) return skipString(text, i);
  if (c !== 0x7b && c !== 0x5b) return valueEnd(text, i);
  let depth = 0;
  STRUCTURE.lastIndex = i;
  for (let m = STRUCTURE.exec(text); m; m = STRUCTURE.exec(text)) {
    const at = m.index;
    const d = text.charCodeAt(at);
    if (d === 0x22) {
      const end = skipString(text, at);
      if (end < 0) return -1;
      STRUCTURE.lastIndex = end;
    } else if (d === 0x7b || d === 0x5b) depth++;
    else if (--depth === 0) return at + 1;
  }
  return -1;
}
