/**
 * Reassembles a logged SSE response into the text the model wrote, so the detail view can show the answer
 * rather than hundreds of `data:` lines. OpenAI streams `choices[].delta.content`; Anthropic streams
 * `content_block_delta` events carrying text, thinking or tool-input JSON.
 */

export interface SseEvent {
  event: string | null;
  data: string;
}

export function looksLikeSse(body: string, contentType?: string): boolean {
  if (contentType?.includes('text/event-stream')) return true;
  return /^(data|event|id|retry):/m.test(body.slice(0, 200)) && !body.trimStart().startsWith('{');
}

export function parseSse(body: string): SseEvent[] {
  const events: SseEvent[] = [];
  for (const block of body.replace(/\r\n?/g, '\n').split(/\n\n+/)) {
    let event: string | null = null;
    const data: string[] = [];
    for (const line of block.split('\n')) {
      if (line.startsWith(':') || line === '') continue;
      const idx = line.indexOf(':');
      const field = idx === -1 ? line : line.slice(0, idx);
      const value = idx === -1 ? '' : line.slice(idx + 1).replace(/^ /, '');
      if (field === 'event') event = value;
      else if (field === 'data') data.push(value);
    }
    if (event !== null || data.length > 0) events.push({ event, data: data.join('\n') });
  }
  return events;
}

function tryJson(s: string): unknown {
  try {
    return JSON.parse(s);
  } catch {
    return undefined;
  }
}

interface OpenAIChunk {
  choices?: { index?: number; delta?: { content?: string | null; reasoning_content?: string | null } }[];
  type?: string;
  delta?: string;
}

interface AnthropicEvent {
  type?: string;
  delta?: { type?: string; text?: string; thinking?: string; partial_json?: string };
}

/** The text the stream carried, or null when no event had any (e.g. an error-only stream). */
export function reassembleSse(events: SseEvent[]): string | null {
  const byChoice = new Map<number, string>();
  const parts: string[] = [];
  let found = false;
  for (const ev of events) {
    if (ev.data === '[DONE]') continue;
    const json = tryJson(ev.data);
    if (!json || typeof json !== 'object') continue;
    const a = json as AnthropicEvent;
    if (a.type === 'content_block_delta' && a.delta) {
      const piece = a.delta.text ?? a.delta.thinking ?? a.delta.partial_json;
      if (typeof piece === 'string') {
        parts.push(piece);
        found = true;
      }
      continue;
    }
    if (a.type === 'content_block_stop') {
      parts.push('\n\n');
      continue;
    }
    const o = json as OpenAIChunk;
    // Responses API: `response.output_text.delta` events carry `delta` as a string.
    if (typeof o.type === 'string' && o.type.endsWith('output_text.delta') && typeof o.delta === 'string') {
      parts.push(o.delta);
      found = true;
      continue;
    }
    for (const c of o.choices ?? []) {
      const piece = c.delta?.content ?? c.delta?.reasoning_content;
      if (typeof piece === 'string') {
        const i = c.index ?? 0;
        byChoice.set(i, (byChoice.get(i) ?? '') + piece);
        found = true;
      }
    }
  }
  if (!found) return null;
  if (byChoice.size > 0) {
    const texts = [...byChoice.entries()].sort((x, y) => x[0] - y[0]).map(([, t]) => t);
    return texts.length === 1 ? texts[0]! : texts.map((t, i) => `[choice ${i}]\n${t}`).join('\n\n');
  }
  return parts.join('').trim();
}

/** Pretty-prints JSON; anything else (or truncated JSON) is returned as is. */
export function prettyBody(body: string): { text: string; json: boolean } {
  const parsed = tryJson(body);
  if (parsed === undefined) return { text: body, json: false };
  return { text: JSON.stringify(parsed, null, 2), json: true };
}
