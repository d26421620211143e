/**
 * Logged request and response bodies as a conversation: who said what, which tools were called with what,
 * and what they returned. Understands OpenAI chat completions, OpenAI responses and Anthropic messages,
 * streamed (SSE, reassembled here) or not. Images and audio become placeholders: the log keeps the text.
 * Anything else returns null and the raw view is shown instead.
 */
import { parseSse, type SseEvent } from './sse.js';

export type Part =
  | { type: 'text'; text: string }
  | { type: 'thinking'; text: string }
  | { type: 'image'; label: string }
  | { type: 'tool_call'; name: string; id: string | null; args: string }
  | { type: 'tool_result'; id: string | null; text: string };

export interface ChatMessage {
  role: string;
  parts: Part[];
}

type Json = Record<string, unknown>;
const isObj = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (v: unknown): string => (typeof v === 'string' ? v : v === undefined ? '' : JSON.stringify(v));

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** Text of a tool result or similar: a string, or a list of text blocks (images as placeholders). */
function flatText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content))
    return content
      .map((b) =>
        isObj(b) && typeof b.text === 'string'
          ? b.text
          : isObj(b) && /image/.test(str(b.type))
            ? '[image]'
            : '',
      )
      .filter(Boolean)
      .join('\n');
  return content === undefined || content === null ? '' : JSON.stringify(content);
}

/** One content block, in any of the three APIs' spellings. */
function blockParts(b: unknown): Part[] {
  if (typeof b === 'string') return b ? [{ type: 'text', text: b }] : [];
  if (!isObj(b)) return [];
  const type = str(b.type);
  if (type === 'text' || type === 'input_text' || type === 'output_text')
    return [{ type: 'text', text: str(b.text) }];
  if (type === 'refusal') return [{ type: 'text', text: str(b.refusal) }];
  if (type === 'thinking') return [{ type: 'thinking', text: str(b.thinking) }];
  if (type === 'redacted_thinking') return [{ type: 'thinking', text: '(redacted)' }];
  if (type === 'image_url' || type === 'image' || type === 'input_image')
    return [{ type: 'image', label: 'image' }];
  if (type === 'input_audio' || type === 'audio') return [{ type: 'image', label: 'audio' }];
  if (type === 'file' || type === 'input_file' || type === 'document')
    return [{ type: 'image', label: 'file' }];
  if (type === 'tool_use' || type === 'server_tool_use')
    return [
      { type: 'tool_call', name: str(b.name), id: str(b.id) || null, args: JSON.stringify(b.input ?? {}) },
    ];
  if (type === 'tool_result' || type === 'web_search_tool_result')
    return [{ type: 'tool_result', id: str(b.tool_use_id) || null, text: flatText(b.content) }];
  return [];
}

function contentParts(content: unknown): Part[] {
  if (typeof content === 'string') return content ? [{ type: 'text', text: content }] : [];
  if (Array.isArray(content)) return content.flatMap(blockParts);
  return [];
}

/** An OpenAI chat message (request or response side). */
function openaiChatMessage(m: Json): ChatMessage {
  const parts = contentParts(m.content);
  if (typeof m.refusal === 'string') parts.push({ type: 'text', text: m.refusal });
  if (Array.isArray(m.tool_calls))
    for (const c of m.tool_calls)
      if (isObj(c) && isObj(c.function))
        parts.push({
          type: 'tool_call',
          name: str(c.function.name),
          id: str(c.id) || null,
          args: str(c.function.arguments),
        });
  if (str(m.role) === 'tool')
    return {
      role: 'tool',
      parts: [{ type: 'tool_result', id: str(m.tool_call_id) || null, text: flatText(m.content) }],
    };
  return { role: str(m.role) || 'assistant', parts };
}

/** OpenAI responses' input or output items. */
function responsesItems(items: unknown[]): ChatMessage[] {
  const out: ChatMessage[] = [];
  for (const it of items) {
    if (!isObj(it)) continue;
    const type = str(it.type);
    if (type === 'function_call')
      out.push({
        role: 'assistant',
        parts: [
          { type: 'tool_call', name: str(it.name), id: str(it.call_id) || null, args: str(it.arguments) },
        ],
      });
    else if (type === 'function_call_output')
      out.push({
        role: 'tool',
        parts: [{ type: 'tool_result', id: str(it.call_id) || null, text: flatText(it.output) }],
      });
    else if (type === 'reasoning') {
      const summary = Array.isArray(it.summary)
        ? it.summary.map((s) => (isObj(s) ? str(s.text) : '')).join('\n')
        : '';
      if (summary) out.push({ role: 'assistant', parts: [{ type: 'thinking', text: summary }] });
    } else if (type === 'message' || it.role !== undefined)
      out.push({ role: str(it.role) || 'assistant', parts: contentParts(it.content) });
  }
  return out;
}

/** A request body as the conversation it sends. */
export function requestChat(body: string | null): ChatMessage[] | null {
  if (!body) return null;
  const j = parseJson(body);
  if (!isObj(j)) return null;
  const out: ChatMessage[] = [];
  if (j.system !== undefined) out.push({ role: 'system', parts: contentParts(j.system) });
  if (typeof j.instructions === 'string') out.push({ role: 'system', parts: contentParts(j.instructions) });
  if (Array.isArray(j.messages)) {
    for (const m of j.messages) {
      if (!isObj(m)) continue;
      // Anthropic's tool results travel in user turns; OpenAI's in tool turns.
      out.push(
        Array.isArray(m.content) || m.tool_calls || m.role === 'tool'
          ? openaiChatMessage(m)
          : { role: str(m.role), parts: contentParts(m.content) },
      );
    }
    return out;
  }
  if (typeof j.input === 'string') return [...out, { role: 'user', parts: contentParts(j.input) }];
  if (Array.isArray(j.input)) return [...out, ...responsesItems(j.input)];
  return null;
}

/** A non-streamed response body as the turn(s) it answers with. */
function responseJson(j: unknown): ChatMessage[] | null {
  if (!isObj(j)) return null;
  if (Array.isArray(j.choices))
    return j.choices.filter(isObj).map((c) => openaiChatMessage(isObj(c.message) ? c.message : {}));
  if (Array.isArray(j.output)) return responsesItems(j.output);
  if (j.type === 'message' && Array.isArray(j.content))
    return [{ role: str(j.role) || 'assistant', parts: contentParts(j.content) }];
  return null;
}

/** OpenAI chat chunks: text and tool-call fragments, gathered per index. */
function openaiChatStream(events: SseEvent[]): ChatMessage[] | null {
  let text = '';
  const calls: { id: string; name: string; args: string }[] = [];
  let seen = false;
  for (const e of events) {
    const j = parseJson(e.data);
    if (!isObj(j) || !Array.isArray(j.choices)) continue;
    seen = true;
    const delta = isObj(j.choices[0]) && isObj(j.choices[0].delta) ? j.choices[0].delta : null;
    if (!delta) continue;
    if (typeof delta.content === 'string') text += delta.content;
    if (Array.isArray(delta.tool_calls))
      for (const tc of delta.tool_calls) {
        if (!isObj(tc)) continue;
        const i = typeof tc.index === 'number' ? tc.index : 0;
        calls[i] ??= { id: '', name: '', args: '' };
        if (typeof tc.id === 'string') calls[i].id = tc.id;
        if (isObj(tc.function)) {
          if (typeof tc.function.name === 'string') calls[i].name += tc.function.name;
          if (typeof tc.function.arguments === 'string') calls[i].args += tc.function.arguments;
        }
      }
  }
  if (!seen) return null;
  const parts: Part[] = text ? [{ type: 'text', text }] : [];
  for (const c of calls)
    if (c) parts.push({ type: 'tool_call', name: c.name, id: c.id || null, args: c.args });
  return [{ role: 'assistant', parts }];
}

/** Anthropic message events: blocks started, then filled by deltas. */
function anthropicStream(events: SseEvent[]): ChatMessage[] | null {
  const blocks: Json[] = [];
  const json: string[] = [];
  let seen = false;
  for (const e of events) {
    const j = parseJson(e.data);
    if (!isObj(j)) continue;
    if (j.type === 'message_start') seen = true;
    const i = typeof j.index === 'number' ? j.index : 0;
    if (j.type === 'content_block_start' && isObj(j.content_block)) {
      blocks[i] = { ...j.content_block };
      json[i] = '';
    } else if (j.type === 'content_block_delta' && isObj(j.delta) && blocks[i]) {
      const d = j.delta;
      if (d.type === 'text_delta') blocks[i].text = str(blocks[i].text) + str(d.text);
      else if (d.type === 'thinking_delta') blocks[i].thinking = str(blocks[i].thinking) + str(d.thinking);
      else if (d.type === 'input_json_delta') json[i] += str(d.partial_json);
    }
  }
  if (!seen) return null;
  blocks.forEach((b, i) => {
    if (b && json[i]) b.input = parseJson(json[i]) ?? json[i];
  });
  return [{ role: 'assistant', parts: blocks.flatMap(blockParts) }];
}

/** OpenAI responses streams end with the whole response in response.completed. */
function responsesStream(events: SseEvent[]): ChatMessage[] | null {
  for (let k = events.length - 1; k >= 0; k--) {
    const j = parseJson(events[k]!.data);
    if (
      isObj(j) &&
      typeof j.type === 'string' &&
      j.type.startsWith('response.') &&
      isObj(j.response) &&
      Array.isArray(j.response.output) &&
      j.response.output.length > 0
    )
      return responsesItems(j.response.output);
  }
  // Cut before completion: gather the text deltas.
  let text = '';
  for (const e of events) {
    const j = parseJson(e.data);
    if (isObj(j) && j.type === 'response.output_text.delta') text += str(j.delta);
  }
  return text ? [{ role: 'assistant', parts: [{ type: 'text', text }] }] : null;
}

/** A response body (JSON or SSE) as the conversation turns it adds. */
export function responseChat(body: string | null, sse: boolean): ChatMessage[] | null {
  if (!body) return null;
  if (!sse) return responseJson(parseJson(body));
  const events = parseSse(body);
  return anthropicStream(events) ?? responsesStream(events) ?? openaiChatStream(events);
}
