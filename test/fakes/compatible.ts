/**
 * Fakes of providers that speak OpenAI's or Anthropic's API under their own paths, credentials and model
 * names, shaped as each documents it:
 * - Azure OpenAI (https://learn.microsoft.com/azure/ai-foundry/openai/reference): POST
 *   /openai/deployments/{deployment}/chat/completions?api-version=…, the key in `api-key`; a deployment
 *   runs one model, which the response names (e.g. gpt-4o-2024-11-20), whatever the body says.
 * - OpenRouter (https://openrouter.ai/docs/api-reference/overview): OpenAI's chat completions under
 *   /api/v1, `Authorization: Bearer`, models named `<vendor>/<model>`.
 * - An Anthropic-compatible endpoint (DeepSeek's, https://api-docs.deepseek.com/guides/anthropic_api):
 *   Anthropic's Messages API under /anthropic/v1/messages, the key in `x-api-key` or as a Bearer token.
 * - A server that refuses `stream_options` (some OpenAI-compatible servers do), for `streamUsage: false`.
 */
import { renderAnthropic, renderAnthropicError } from './anthropic.js';
import { renderOpenAI, renderOpenAIError } from './openai.js';
import { jsonResponse, type FakeRequest, type RenderedResponse } from './render.js';
import type { Scenario } from './scenario.js';
import { startFakeUpstream, type FakeUpstream } from './server.js';

const withPath = (req: FakeRequest, path: string, body = req.body): FakeRequest => ({ ...req, path, body });

function jsonBody(req: FakeRequest): Record<string, unknown> | null {
  try {
    const v: unknown = JSON.parse(req.body.toString('utf8'));
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

const FILTER_RESULTS = {
  hate: { filtered: false, severity: 'safe' },
  self_harm: { filtered: false, severity: 'safe' },
  sexual: { filtered: false, severity: 'safe' },
  violence: { filtered: false, severity: 'safe' },
};
const PROMPT_FILTER = [{ prompt_index: 0, content_filter_results: FILTER_RESULTS }];

/** Azure OpenAI: `deployments` maps each deployment name to the model it runs. */
export function startFakeAzureOpenAI(
  deployments: Record<string, string>,
  apiKey = 'azure-key-1',
): Promise<FakeUpstream> {
  return startFakeUpstream((req, scenario) => {
    const url = new URL(req.path, 'http://azure.invalid');
    if (req.headers['api-key'] !== apiKey)
      return jsonResponse(
        401,
        {},
        {
          error: {
            code: '401',
            message:
              'Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource.',
          },
        },
      );
    if (!url.searchParams.get('api-version'))
      return jsonResponse(404, {}, { error: { code: '404', message: 'Resource not found' } });
    const m = /^\/openai\/deployments\/([^/]+)\/(chat\/completions|embeddings)$/.exec(url.pathname);
    const model = m ? deployments[decodeURIComponent(m[1]!)] : undefined;
    if (!m || !model)
      return jsonResponse(
        404,
        {},
        {
          error: {
            code: 'DeploymentNotFound',
            message:
              'The API deployment for this resource does not exist. If you created the deployment within the last 5 minutes, please wait a moment and try again.',
          },
        },
      );
    // The deployment decides the model: the response names it, not what the body said.
    const body = { ...jsonBody(req), model };
    const rendered = renderOpenAI(withPath(req, `/v1/${m[2]}`, Buffer.from(JSON.stringify(body))), scenario);
    const headers = { ...rendered.headers, 'apim-request-id': 'fake-apim-1', 'x-ms-region': 'East US' };
    if (rendered.status !== 200 || m[2] !== 'chat/completions') return { ...rendered, headers };
    // Azure's content filter: a stream opens with a chunk of prompt filter results and no model (empty
    // strings), and a whole response carries the results beside its choices.
    if (rendered.stream)
      return {
        ...rendered,
        headers,
        pieces: [
          `data: ${JSON.stringify({ choices: [], created: 0, id: '', model: '', object: '', prompt_filter_results: PROMPT_FILTER })}\n\n`,
          ...rendered.pieces,
        ],
      };
    const whole = JSON.parse(rendered.pieces.join('')) as { choices: Record<string, unknown>[] };
    whole.choices = whole.choices.map((c) => ({ ...c, content_filter_results: FILTER_RESULTS }));
    return {
      ...rendered,
      headers,
      pieces: [JSON.stringify({ ...whole, prompt_filter_results: PROMPT_FILTER })],
    };
  });
}

/** OpenRouter: OpenAI's chat completions under /api/v1, the key as a Bearer token. */
export function startFakeOpenRouter(apiKey = 'sk-or-v1-fake'): Promise<FakeUpstream> {
  return startFakeUpstream((req, scenario) => {
    if (req.headers.authorization !== `Bearer ${apiKey}`)
      return jsonResponse(401, {}, { error: { message: 'No auth credentials found', code: 401 } });
    const path = req.path.split('?')[0] ?? '';
    if (!path.startsWith('/api/v1/'))
      return jsonResponse(404, {}, { error: { message: 'Not Found', code: 404 } });
    return renderOpenAI(withPath(req, path.slice('/api'.length)), scenario);
  });
}

/** An Anthropic-compatible endpoint: the Messages API under /anthropic. */
export function startFakeAnthropicCompatible(apiKey = 'sk-compat-1'): Promise<FakeUpstream> {
  return startFakeUpstream((req, scenario) => {
    // The key as Anthropic takes it (`x-api-key`) or as an auth token (the SDK's Bearer form).
    const key = req.headers['x-api-key'] ?? req.headers.authorization?.replace(/^Bearer /, '');
    if (key !== apiKey) return renderAnthropicError(401);
    const path = req.path.split('?')[0] ?? '';
    if (!path.startsWith('/anthropic/')) return renderAnthropicError(404);
    return renderAnthropic(withPath(req, path.slice('/anthropic'.length)), scenario);
  });
}

/** An OpenAI-compatible server that refuses `stream_options` with 400, as some do. */
export function startFakeStrictCompatible(): Promise<FakeUpstream> {
  return startFakeUpstream((req: FakeRequest, scenario: Scenario): RenderedResponse => {
    if (jsonBody(req)?.stream_options !== undefined)
      return renderOpenAIError(400, { message: 'Unrecognized request argument supplied: stream_options' });
    return renderOpenAI(req, scenario);
  });
}
