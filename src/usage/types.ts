/** What the proxy hands the usage layer, and what it gets back. Implemented in src/usage/. */
import type { Provider, UsageSource } from '../types.js';

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
  source: UsageSource;
  /** Model as the provider reported it in the response (more precise than the request's alias). */
  model: string | null;
}

/** What the proxy learned from the request body (parsed once). */
export interface RequestInfo {
  provider: Provider;
  path: string; // upstream path without query, e.g. /v1/chat/completions
  model: string | null;
  stream: boolean;
  end_user: string | null; // OpenAI `user` / Anthropic `metadata.user_id`
  /** Parsed JSON body when it was JSON (null otherwise); used for estimates. */
  json: unknown;
  /** The body decoded as UTF-8, when it was decoded for `json`: the log row's copy of a body it holds whole. */
  text?: string;
  /** Why a body that says it is multipart could not be read (the proxy refuses it), else absent. */
  bodyError?: string;
}

/**
 * Observes the response body as it passes (never changes it). `write` is called with each raw chunk as
 * received from upstream (possibly compressed per `content-encoding`), `finish` once at the end or abort.
 */
export interface ResponseTap {
  write(chunk: Buffer): void;
  /** complete=false when the stream was cut short (client abort, upstream drop, timeout). */
  finish(complete: boolean): Usage;
  /**
   * Decoded response text kept for the log (up to the body-log limit), whether it was truncated, and for a
   * stream what search reads instead of its frames (RequestLogRow.response_search_text).
   */
  body(): { text: string | null; truncated: boolean; searchText: string | null };
}
