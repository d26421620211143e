/**
 * The one shape every upstream provider takes. Whatever differs between providers — how an error body
 * looks, where the credential is, which paths are which kind of call, how usage is reported — is data or a
 * function here, so the proxy, usage, limits and WebSocket layers ask the provider's module and never
 * branch on its name. How to add a provider or an endpoint: docs/ARCHITECTURE.md.
 */
import type { ProxyError } from '../errors.js';
import type { Provider } from '../types.js';
import type { OutputCounter } from '../usage/estimate.js';
import type { TokenCounts } from '../usage/normalize.js';
import type { Usage } from '../usage/types.js';

/** What a call is, by its path. Rows, limits and (issue #13) prices read this, never the raw path. */
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

/** Usage as a response reported it so far; `final` once the provider's figures for the whole call came. */
export interface Reported {
  counts: TokenCounts | null;
  model: string | null;
  final: boolean;
}

/**
 * Reads one SSE stream's events (created per response). The driver (usage/stream-reader.ts) splits the
 * stream and parses JSON only for events `skim` declines, so the frequent text deltas are never parsed.
 */
export interface SseEventReader {
  /** True when the event was fully read without a parse (a text delta): the driver skips it. */
  skim(event: string, data: string): boolean;
  onEvent(data: Record<string, unknown>): void;
  /** An event too big to hold whole (a huge final event): its usage sits in the tail, its model in the head. */
  onClipped(data: string): void;
  reported(): Reported;
}

/** How one kind of call reports its usage. */
export interface UsageReader {
  /**
   * The `usage` member of a complete JSON body (a Responses wrapper already unwrapped); `body` is that
   * whole object, for what sits beside `usage` (a transcription's `duration`).
   */
  json(usage: unknown, body?: Record<string, unknown>): { counts: TokenCounts | null; final: boolean };
  /** The members of `body` that `json` reads besides `usage` (a body is read by these members alone). */
  bodyMembers?: readonly string[];
  sse(output: OutputCounter): SseEventReader;
  /** False where the call generates no text (embeddings): an estimate then counts no output. */
  generatesOutput: boolean;
  /**
   * False where an estimate from the prompt's text would be meaningless (audio in or out, images): a
   * response without usage is then unpriced, never guessed.
   */
  estimable?: boolean;
}

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
  /** A caller's request for a response (checked against the key's limits), or null. */
  parseClientCreate(data: Buffer): Record<string, unknown> | null;
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
}

export interface ProviderModule {
  id: Provider;
  /** The route segment: /api/proxy/<route>/… */
  route: string;
  /** genai-prices' provider id for this provider's models. */
  priceProviderId: string;
  /** Headers that carry the caller's provider credential, in order of precedence (fingerprinted, never logged). */
  credentialHeaders: readonly string[];
  endpoints: readonly EndpointRow[];
  /** The end user a request body names (OpenAI `user`, Anthropic `metadata.user_id`), or null. */
  endUser(body: Record<string, unknown>): string | null;
  /** keyrelay's own error as a body in the provider's error shape, so SDKs raise their usual exception. */
  errorBody(err: ProxyError): string;
  socket: SocketEvents | null;
  batches?: BatchSupport;
}
