/**
 * What the usage layer reads and what it gives back, and the shape of a provider's usage readers (which the
 * provider modules implement: this layer knows no provider). Implemented in src/usage/.
 */
import type { OutputCounter } from './estimate.js';

export type UsageSource = 'provider' | 'estimated' | 'partial' | 'none';

export interface Usage {
  input_tokens: number | null; // all prompt tokens, cache reads and writes included
  cache_read_tokens: number | null;
  cache_write_tokens: number | null;
  /** Of cache_write_tokens, those written with Anthropic's 1-hour TTL (billed at twice the input rate). */
  cache_write_1h_tokens?: number;
  output_tokens: number | null;
  reasoning_tokens: number | null;
  /** Audio parts of input_tokens / cache_read_tokens / output_tokens (Realtime), priced at their own rates. */
  input_audio_tokens?: number;
  cache_read_audio_tokens?: number;
  output_audio_tokens?: number;
  /** Of input_tokens, image tokens (gpt-image-1), priced at the model's image rate. */
  input_image_tokens?: number;
  /** Seconds of input audio, for models billed by duration (whisper-1); tokens are then null. */
  input_audio_seconds?: number;
  /**
   * Server-side tool uses billed apart from tokens, by fee (ToolFee), as the provider reported them. Kept on
   * the row, so a later price can be applied to the counts. Absent when none ran.
   */
  tool_uses?: ToolUses;
  source: UsageSource;
  /** Model as the provider reported it in the response (more precise than the request's alias). */
  model: string | null;
  /**
   * Why the response ended, as the provider said it (OpenAI `choices[].finish_reason`, the Responses API's
   * `status`, Anthropic's `stop_reason`): OpenTelemetry's `gen_ai.response.finish_reasons`. Absent when none
   * was read.
   */
  finish_reasons?: string[];
}

/**
 * Fees a provider bills per use of a server-side tool. `web_searches` and `storage_searches` are the price
 * library's own units; the others name what the provider bills (a container, a generated image, a fetch),
 * which the library has no unit for yet.
 */
export type ToolFee =
  | 'web_searches'
  | 'storage_searches'
  | 'web_fetches'
  | 'code_execution_containers'
  | 'code_interpreter_containers'
  | 'image_generations'
  | (string & {});

/** Counts of tool uses by fee (a ToolFee); only fees with a count above zero. */
export type ToolUses = Record<string, number>;

/** What a request body says, parsed once. */
export interface ParsedRequest {
  model: string | null;
  stream: boolean;
  end_user: string | null; // OpenAI `user` / Anthropic `metadata.user_id`
  /** Parsed JSON body when it was JSON (null otherwise); used for estimates. */
  json: unknown;
  /** The body decoded as UTF-8, when it was decoded for `json`: the log row's copy of a body it holds whole. */
  text?: string;
  /** Why a body that says it is multipart could not be read (the proxy refuses it), else absent. */
  bodyError?: string;
  /**
   * A batch creation, or an upload of a batch's input file: what its requests run. The body's own `model`
   * is not what runs (`model` is null); model lists are checked against these (limits/access.ts).
   */
  batch?: BatchWork | { inputFile: string | null };
}

/** The distinct models a batch's requests name, and how many requests name none keyrelay could read. */
export interface BatchWork {
  models: string[];
  unreadable: number;
}

/**
 * Observes the response body as it passes (never changes it). `write` is called with each raw chunk as
 * received from upstream (possibly compressed per `content-encoding`), `finish` once at the end or abort.
 */
export interface ResponseTap {
  write(chunk: Buffer): void;
  /**
   * Resolves once everything written is decoded and read (at once for a body that is not compressed, whose
   * bytes are read as they are written); finish() after it counts the whole body.
   */
  drained(): Promise<void>;
  /** complete=false when the stream was cut short (client abort, upstream drop, timeout). */
  finish(complete: boolean): Usage;
  /**
   * Decoded response text kept for the log (up to the body-log limit), whether it was truncated, and for a
   * stream what search reads instead of its frames (RequestLogRow.response_search_text).
   */
  body(): { text: string | null; truncated: boolean; searchText: string | null };
}

/** Token counts as a provider reports them: a Usage without its source and model. */
export type TokenCounts = Omit<Usage, 'source' | 'model'>;

/** Usage as a response reported it so far; `final` once the provider's figures for the whole call came. */
export interface Reported {
  counts: TokenCounts | null;
  model: string | null;
  final: boolean;
  /** Usage.finish_reasons, as far as seen. */
  finishReasons?: string[];
}

/**
 * Reads one SSE stream's events (created per response). The driver (stream-reader.ts) splits the stream
 * and parses JSON only for events `skim` declines, so the frequent text deltas are never parsed.
 */
export interface SseEventReader {
  /** True when the event was fully read without a parse (a text delta): the driver skips it. */
  skim(event: string, data: string): boolean;
  onEvent(data: Record<string, unknown>): void;
  /** An event too big to hold whole (a huge final event): its usage sits in the tail, its model in the head. */
  onClipped(data: string): void;
  reported(): Reported;
}

/** How one kind of call reports its usage (a provider module's, per endpoint). */
export interface UsageReader {
  /**
   * The `usage` member of a complete JSON body (a Responses wrapper already unwrapped); `body` is that
   * whole object, for what sits beside `usage` (a transcription's `duration`).
   */
  json(usage: unknown, body?: Record<string, unknown>): { counts: TokenCounts | null; final: boolean };
  /** The members of `body` that `json` reads besides `usage` (a body is read by these members alone). */
  bodyMembers?: readonly string[];
  /**
   * Why a JSON response ended (Usage.finish_reasons), from `body` (the whole object, or only its read
   * members) or, where the reason sits in members too big to read for it (chat `choices`), the body's text.
   */
  finishReasons?(body: Record<string, unknown>, text: string | null): string[];
  sse(output: OutputCounter): SseEventReader;
  /** False where the call generates no text (embeddings): an estimate then counts no output. */
  generatesOutput: boolean;
  /**
   * False where an estimate from the prompt's text would be meaningless (audio in or out, images): a
   * response without usage is then unpriced, never guessed.
   */
  estimable?: boolean;
}
