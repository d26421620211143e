/**
 * The one shape every upstream provider takes. Whatever differs between providers — how an error body
 * looks, where the credential is, which paths are which kind of call, how usage is reported — is data or a
 * function here, so the proxy, metering, limits and WebSocket layers ask the provider's module and never
 * branch on its name. How to add a provider or an endpoint: docs/ARCHITECTURE.md.
 */
import type { ProxyError } from '../errors.js';
import type { FreeToolFees, TokenCounts, Usage, UsageReader } from '../usage/index.js';

/** What a call is, by its path. Rows, limits and prices read this, never the raw path. */
export type EndpointClass =
  | 'chat'
  | 'completions'
  | 'responses'
  | 'embeddings'
  | 'messages'
  | 'complete'
  | 'count_tokens'
  | 'models'
  | 'audio_transcription'
  | 'audio_translation'
  | 'audio_speech'
  | 'images'
  | 'moderations'
  | 'batches'
  | 'files'
  | 'realtime'
  | 'other';

export interface EndpointRow {
  /** Tested against the upstream path without its query and trailing slashes; the first row that matches wins. */
  match: RegExp;
  class: EndpointClass;
  /** null: the call bills no tokens keyrelay reads (yet); its response only feeds the body log. */
  usage: UsageReader | null;
  /**
   * The one documented change to a request body (docs/ARCHITECTURE.md, "Body"): a stream that did not ask
   * for usage is sent asking for it, and what that adds is stripped from the stream again.
   */
  injectStreamUsage?: boolean;
}

export interface Endpoint {
  class: EndpointClass;
  usage: UsageReader | null;
  injectStreamUsage: boolean;
}

/** One accounted response on a WebSocket, as its end event reports it. */
export type SocketProtocol = 'realtime' | 'responses' | 'other';

/** A provider's WebSocket events, for the ones that speak a protocol keyrelay accounts (OpenAI's). */
export interface SocketEvents {
  protocolOf(path: string): SocketProtocol;
  /** A subprotocol entry that carries the provider credential (browsers cannot set headers), if any. */
  credentialSubprotocol: string | null;
  /** The type of a server event from its first bytes, without a parse; null when it is no event. */
  peekServerType(data: Buffer): string | null;
  /** The kinds of server event the ledger acts on. */
  kindOf(type: string): 'delta' | 'session' | 'created' | 'end' | 'error' | null;
  /** Whether an end event of this type (and response status) is a failure. */
  failed(type: string, status: string | null): boolean;
  /**
   * A caller's request for a response (checked against the key's limits), null for any other message, or
   * 'unreadable' for one that may be a request but cannot be read (refused: it would pass unchecked).
   */
  parseClientCreate(data: Buffer): Record<string, unknown> | null | 'unreadable';
  usageFromResponse(response: Record<string, unknown>, model: string | null): Usage;
  /** JSON for the log with bulky payloads (base64 audio) replaced by a note of their size. */
  forLog(value: unknown): string;
  /** keyrelay's refusal of one create, as an event in the protocol's shape. */
  renderErrorEvent(
    protocol: SocketProtocol,
    code: string,
    message: string,
    status: number,
    clientEventId: string | null,
    eventId: string,
  ): string;
}

/** A call on a provider's batch endpoints, as far as keyrelay accounts it. */
export type BatchCall =
  /** Create, retrieve, cancel or list: the body is a batch object or a list of them. */
  | { kind: 'object'; create: boolean }
  /** The results of one batch (Anthropic `/messages/batches/{id}/results`). */
  | { kind: 'results'; batchId: string }
  /** A file's content, which may be a batch's output (OpenAI `/files/{id}/content`). */
  | { kind: 'file_content'; fileId: string };

export interface BatchObject {
  id: string;
  status: string | null;
  request_counts: Record<string, number>;
  output_file_id: string | null;
}

/** One line of a results file: null when it is no result line at all. */
export interface BatchLine {
  succeeded: boolean;
  model: string | null;
  counts: TokenCounts | null;
}

export interface BatchSupport {
  callOf(method: string, path: string): BatchCall | null;
  /** A batch object's fields, or null when the object is not a batch. */
  readObject(o: Record<string, unknown>): BatchObject | null;
  readLine(o: Record<string, unknown>): BatchLine | null;
  /** The provider's documented batch discount (cost × factor), for models the library has no batch price for. */
  discount: { factor: number; documented: string };
  /**
   * The absolute URL a batch object names its results by (Anthropic `results_url`), which SDKs fetch as given:
   * keyrelay rewrites it to its own address (docs/pricing.md, "Batches").
   */
  resultsUrlField?: string;
  /**
   * What a batch creation runs, for model lists: the model each of its requests names (Anthropic: the
   * requests are in the body), or the input file they are in (OpenAI; null when the body names none).
   */
  creation(body: Record<string, unknown>): { models: (string | null)[] } | { inputFile: string | null };
  /** The model one line of a batch input file runs (OpenAI `body.model`), or null. */
  inputLineModel?(line: Record<string, unknown>): string | null;
  /**
   * Uploads of files (OpenAI `POST /v1/files`): `model` is not among their fields, so one sent is a decoy;
   * `isInput`: the fields say the file is a batch's input, whose lines name the models it will run.
   */
  uploads?: { path: RegExp; isInput(fields: Record<string, string>): boolean };
  /** The upstream path of a file's content, from which a batch's input file is read. */
  fileContentPath?(fileId: string): string;
}

/** `Id`: the provider's id, a literal in each module (`ProviderModule<'openai'>`); the registry's keys are these. */
export interface ProviderModule<Id extends string = string> {
  id: Id;
  /** The route segment: /api/proxy/<route>/… */
  route: string;
  /** The OpenTelemetry GenAI `gen_ai.provider.name` value for this provider (its well-known value). */
  genAiName: string;
  /** genai-prices' provider id for this provider's models ('': whichever provider the library finds the model under). */
  priceProviderId: string;
  /** Where the library may know a model it has no price for under priceProviderId (OpenRouter's vendor/model). */
  priceAs?: (model: string) => { priceProviderId: string; model: string } | null;
  /**
   * Tool fees (Usage.tool_uses) the provider documents as billing nothing beyond tokens, with the page that
   * says so: counted on the row, never reported as a missing price.
   */
  freeToolFees: FreeToolFees;
  /** Headers that carry the caller's provider credential, in order of precedence (fingerprinted, never logged). */
  credentialHeaders: readonly string[];
  endpoints: readonly EndpointRow[];
  /** The end user a request body names (OpenAI `user`, Anthropic `metadata.user_id`), or null. */
  endUser: (body: Record<string, unknown>) => string | null;
  /**
   * The session a client names by itself, without keyrelay's headers (Claude Code's session header and
   * `metadata.user_id`, Codex's `session_id` header), or null. `header` reads one request header by its
   * lower-case name; `body` is the parsed JSON body, if any.
   */
  clientSession: (
    header: (name: string) => string | null,
    body: Record<string, unknown> | null,
  ) => string | null;
  /**
   * The rate limits a response's headers report for the credential that made the call (OpenAI
   * `x-ratelimit-*`, Anthropic `anthropic-ratelimit-*`): one entry per limit named, empty when none.
   */
  rateLimits(headers: Readonly<Record<string, string>>): RateLimit[];
  /** keyrelay's own error as a body in the provider's error shape, so SDKs raise their usual exception. */
  errorBody(err: ProxyError): string;
  socket: SocketEvents | null;
  batches?: BatchSupport;
}

/** One rate limit a provider reported on a response: what it allows, what was left, when it refills. */
export interface RateLimit {
  /** What is counted: `requests`, `tokens`, `input_tokens`, `output_tokens`. */
  name: string;
  limit: number | null;
  remaining: number | null;
  /** As the provider wrote it: a time (Anthropic) or a duration such as `6m0s` (OpenAI). */
  reset: string | null;
}

/** Reads `limit`, `remaining` and `reset` for each name from the headers `header(name, part)` names. */
export function readRateLimits(
  headers: Readonly<Record<string, string>>,
  names: readonly string[],
  header: (name: string, part: 'limit' | 'remaining' | 'reset') => string,
): RateLimit[] {
  const num = (v: string | undefined) => (v !== undefined && /^\d+$/.test(v.trim()) ? Number(v) : null);
  const out: RateLimit[] = [];
  for (const name of names) {
    const limit = num(headers[header(name, 'limit')]);
    const remaining = num(headers[header(name, 'remaining')]);
    const reset = headers[header(name, 'reset')] ?? null;
    if (limit !== null || remaining !== null) out.push({ name, limit, remaining, reset });
  }
  return out;
}
