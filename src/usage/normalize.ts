/**
 * Helpers for reading provider usage objects into our Usage fields (input_tokens counts every prompt token,
 * cache reads and writes included: usage/index.ts). Each provider's own reading is in
 * src/providers/<provider>/usage.ts.
 */
export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function num(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : null;
}

export function sub(obj: unknown, key: string): unknown {
  return isRecord(obj) ? obj[key] : undefined;
}

/**
 * Finds the last top-level-looking `"usage": {…}` object in JSON text without parsing the whole text: for
 * bodies too large to keep whole, where only the tail was kept.
 */
export function findUsageObject(text: string): unknown {
  let from = text.length;
  for (let tries = 0; tries < 4; tries++) {
    const at = text.lastIndexOf('"usage"', from);
    if (at < 0) return null;
    const m = /^"usage"\s*:\s*\{/.exec(text.slice(at, at + 64));
    if (m) {
      const open = at + m[0].length - 1;
      const close = findObjectEnd(text, open);
      if (close > 0) {
        try {
          return JSON.parse(text.slice(open, close + 1)) as unknown;
        } catch {
          // not well-formed: look further back
        }
      }
    }
    from = at - 1;
  }
  return null;
}

/** The `model` a JSON text names near its start (a clipped event or body's head), or null. */
export function modelInHead(text: string): string | null {
  return /"model"\s*:\s*"([^"\\]{1,200})"/.exec(text)?.[1] ?? null;
}

/** Index of the `}` closing the object opened at `open`, or -1. */
export function findObjectEnd(text: string, open: number): number {
  let depth = 0;
  let inString = false;
  for (let i = open; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) depth++;
    else if (c === 0x7d || c === 0x5d) {
      depth--;
      if (depth === 0) return i;
    }
  }
  return -1;
}

/**
 * Finish reasons kept per response at most, and the longest kept: a provider's `n` choices are each one,
 * and a reason is a short word; anything longer is not a reason worth a span attribute.
 */
const MAX_FINISH_REASONS = 16;
const MAX_FINISH_REASON_CHARS = 64;

/** Sets reason `v` at `index` (a choice's), when it is a plausible reason and the list has room. */
export function noteFinishReason(into: string[], v: unknown, index = into.length): void {
  if (typeof v !== 'string' || v === '' || v.length > MAX_FINISH_REASON_CHARS) return;
  if (!Number.isInteger(index) || index < 0 || index >= MAX_FINISH_REASONS) return;
  into[index] = v;
}

/** The reasons as a span carries them: in index order, gaps (choices that named none) left out. */
export function finishReasonList(reasons: string[]): string[] | undefined {
  const list = reasons.filter((r) => typeof r === 'string');
  return list.length > 0 ? list : undefined;
}
