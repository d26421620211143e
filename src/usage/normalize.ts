/** Provider usage objects → our Usage fields (SPEC §5: input_tokens counts every prompt token). */
import type { Usage } from './types.js';

export type TokenCounts = Omit<Usage, 'source' | 'model'>;

export type Endpoint =
  | 'openai-chat'
  | 'openai-completions'
  | 'openai-responses'
  | 'openai-embeddings'
  | 'anthropic-messages'
  | 'anthropic-complete';

/** Which token-billed endpoint a path is; null for the rest (models, files, count_tokens, retrievals…). */
export function classifyEndpoint(provider: 'openai' | 'anthropic', path: string): Endpoint | null {
  const p = path.replace(/\/+$/, '');
  if (provider === 'openai') {
    if (p.endsWith('/chat/completions')) return 'openai-chat';
    if (p.endsWith('/completions')) return 'openai-completions';
    if (p.endsWith('/responses')) return 'openai-responses';
    if (p.endsWith('/embeddings')) return 'openai-embeddings';
    return null;
  }
  if (p.endsWith('/messages')) return 'anthropic-messages';
  if (p.endsWith('/complete')) return 'anthropic-complete';
  return null;
}

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function num(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : null;
}

function sub(obj: unknown, key: string): unknown {
  return isRecord(obj) ? obj[key] : undefined;
}

/** OpenAI chat/completions/embeddings (`prompt_tokens`…) or Responses API (`input_tokens`…). */
export function normalizeOpenAIUsage(u: unknown): TokenCounts | null {
  if (!isRecord(u)) return null;
  const responsesShape = num(u.input_tokens) !== null;
  const input = responsesShape ? num(u.input_tokens) : num(u.prompt_tokens);
  if (input === null) return null;
  const output = responsesShape ? num(u.output_tokens) : num(u.completion_tokens);
  const inDetails = responsesShape ? u.input_tokens_details : u.prompt_tokens_details;
  const outDetails = responsesShape ? u.output_tokens_details : u.completion_tokens_details;
  return {
    input_tokens: input, // already includes cached tokens
    // OpenAI reports cached tokens when there are any; a usage object without them means none were cached.
    cache_read_tokens: num(sub(inDetails, 'cached_tokens')) ?? 0,
    cache_write_tokens: 0, // OpenAI has no separately billed cache writes
    // Embeddings produce no output; a chat usage without completion_tokens is an odd server: say unknown.
    output_tokens: output ?? (u.completion_tokens === undefined && u.output_tokens === undefined ? 0 : null),
    reasoning_tokens: num(sub(outDetails, 'reasoning_tokens')),
  };
}

/** Anthropic parts as reported (input_tokens excludes cache reads and writes there). */
export interface AnthropicParts {
  input: number | null;
  cacheWrite: number | null;
  /** `cache_creation.ephemeral_1h_input_tokens`: the part of cacheWrite with the 1-hour TTL. */
  cacheWrite1h: number | null;
  cacheRead: number | null;
  output: number | null;
}

export function emptyAnthropicParts(): AnthropicParts {
  return { input: null, cacheWrite: null, cacheWrite1h: null, cacheRead: null, output: null };
}

/** Merge a (possibly partial, cumulative) Anthropic usage object into the parts seen so far. */
export function mergeAnthropicUsage(into: AnthropicParts, u: unknown): boolean {
  if (!isRecord(u)) return false;
  let seen = false;
  const take = (key: keyof AnthropicParts, v: unknown) => {
    const n = num(v);
    if (n !== null) {
      into[key] = n;
      seen = true;
    }
  };
  take('input', u.input_tokens);
  take('cacheWrite', u.cache_creation_input_tokens);
  take('cacheWrite1h', sub(u.cache_creation, 'ephemeral_1h_input_tokens'));
  take('cacheRead', u.cache_read_input_tokens);
  take('output', u.output_tokens);
  return seen;
}

export function anthropicCounts(parts: AnthropicParts): TokenCounts {
  const cacheWrite = parts.cacheWrite ?? 0;
  const cacheRead = parts.cacheRead ?? 0;
  const cacheWrite1h = Math.min(parts.cacheWrite1h ?? 0, cacheWrite);
  return {
    input_tokens: parts.input === null ? null : parts.input + cacheWrite + cacheRead,
    cache_read_tokens: cacheRead,
    cache_write_tokens: cacheWrite,
    ...(cacheWrite1h > 0 ? { cache_write_1h_tokens: cacheWrite1h } : {}),
    output_tokens: parts.output,
    reasoning_tokens: null, // Anthropic counts thinking inside output_tokens and does not split it out
  };
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
