// Fake OpenAI and Anthropic upstreams on real sockets; scenarios are chosen per request by x-fake-* headers.
import { renderAnthropic, type FakeAnthropicOptions } from './anthropic.js';
import { renderOpenAI, type FakeOpenAIOptions } from './openai.js';
import { renderBody, type FakeRequest } from './render.js';
import { parseScenario } from './scenario.js';
import { startFakeUpstream, type FakeUpstream } from './server.js';
import { encodePieces } from './wire.js';
import { attachFakeOpenAIWs, type FakeWs } from './openai-ws.js';

export { startDecoy, type Decoy } from './decoy.js';
export {
  DEFAULT_REALTIME_USAGE,
  DEFAULT_RESPONSES_USAGE,
  FAKE_AUDIO,
  type FakeWs,
  type FakeWsConnection,
} from './openai-ws.js';
export {
  DEFAULT_ANTHROPIC_USAGE,
  renderAnthropic,
  renderAnthropicError,
  type FakeAnthropicOptions,
  type FakeAnthropicUsage,
} from './anthropic.js';
export {
  DEFAULT_OPENAI_USAGE,
  renderOpenAI,
  renderOpenAIError,
  type FakeOpenAIOptions,
  type FakeOpenAIUsage,
} from './openai.js';
export {
  FAKE_CREATED,
  jsonResponse,
  sseResponse,
  renderBody,
  type FakeCommonOptions,
  sha256,
  textDeltas,
  type FakeRequest,
  type RenderedResponse,
} from './render.js';
export { parseScenario, type FakeEncoding, type Scenario } from './scenario.js';
export { encodePieces, type SendOutcome } from './wire.js';
export type { FakeUpstream, RecordedRequest, RecordedResponse } from './server.js';

export function startFakeOpenAI(opts: FakeOpenAIOptions = {}): Promise<FakeUpstream & { ws: FakeWs }> {
  return startFakeUpstream(
    (req, scenario) => opts.respond?.(req, scenario) ?? renderOpenAI(req, scenario, opts),
  ).then((up) => Object.assign(up, { ws: attachFakeOpenAIWs(up.server) }));
}

export function startFakeAnthropic(opts: FakeAnthropicOptions = {}): Promise<FakeUpstream> {
  return startFakeUpstream(
    (req, scenario) => opts.respond?.(req, scenario) ?? renderAnthropic(req, scenario, opts),
  );
}

export type FakeProvider = 'openai' | 'anthropic';

/** What a request to the given fake sends, as input to the expected-bytes helpers. */
export interface ExpectedInput {
  method?: string;
  path: string;
  headers?: Record<string, string>;
  body?: Buffer | string | Record<string, unknown>;
}

function toFakeRequest(input: ExpectedInput): FakeRequest {
  const body =
    input.body === undefined
      ? Buffer.alloc(0)
      : Buffer.isBuffer(input.body)
        ? input.body
        : Buffer.from(typeof input.body === 'string' ? input.body : JSON.stringify(input.body));
  const headers = Object.fromEntries(
    Object.entries(input.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v]),
  );
  return { method: input.method ?? 'POST', path: input.path, headers, body };
}

/**
 * The exact decoded body bytes a fake answers to this request (full response: ignores stall/drop and
 * chunking). `body` must be byte-identical to what reaches the fake (pass the same string/Buffer).
 */
export function expectedBody(
  provider: FakeProvider,
  input: ExpectedInput,
  opts: FakeOpenAIOptions & FakeAnthropicOptions = {},
): Buffer {
  const req = toFakeRequest(input);
  const scenario = parseScenario(req.headers);
  const rendered =
    provider === 'openai' ? renderOpenAI(req, scenario, opts) : renderAnthropic(req, scenario, opts);
  return renderBody(rendered);
}

/** Like expectedBody, but as the wire carries it with the request's x-fake-encoding applied. */
export async function expectedWireBody(
  provider: FakeProvider,
  input: ExpectedInput,
  opts: FakeOpenAIOptions & FakeAnthropicOptions = {},
): Promise<Buffer> {
  const req = toFakeRequest(input);
  const scenario = parseScenario(req.headers);
  const rendered =
    provider === 'openai' ? renderOpenAI(req, scenario, opts) : renderAnthropic(req, scenario, opts);
  return Buffer.concat(await encodePieces(rendered.pieces, scenario.encoding));
}
