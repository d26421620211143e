/**
 * Named upstreams (KEYRELAY_UPSTREAMS): providers an operator adds at /api/proxy/<name>/…, each taking the
 * shape of a built-in (OpenAI's or Anthropic's API) and changing only what differs: its id and route, its
 * origin, the header its credential comes in, how its models are priced, and whether an OpenAI-shaped
 * stream is asked for its usage. The particulars of a known kind (Azure OpenAI, OpenRouter) are here too;
 * the configuration is read in upstream-config.ts.
 */
import { anthropic } from './anthropic/index.js';
import { openai } from './openai/index.js';
import type { ProviderModule } from './types.js';
import type { NamedUpstream } from './upstream-config.js';

/**
 * OpenRouter names a model `<vendor>/<model>`: the library's OpenRouter entry first, then the vendor's own
 * entry for the model (its provider mapping: `anthropic/claude-sonnet-4-5` is Anthropic's claude-sonnet-4-5).
 */
function vendorModel(model: string): { priceProviderId: string; model: string } | null {
  const slash = model.indexOf('/');
  if (slash <= 0 || slash === model.length - 1) return null;
  return { priceProviderId: model.slice(0, slash), model: model.slice(slash + 1) };
}

/** The provider module a named upstream runs on: its shape's, with what differs changed. */
export function upstreamModule(u: NamedUpstream): ProviderModule {
  const base: ProviderModule = u.shape === 'openai' ? openai : anthropic;
  const streamUsage = u.streamUsage ?? true;
  return {
    ...base,
    id: u.name,
    route: u.name,
    priceProviderId: u.priceProvider ?? u.kind ?? '',
    // Semantic conventions name Azure OpenAI; any other compatible server is the upstream's own name.
    genAiName: u.kind === 'azure' ? 'azure.ai.openai' : u.name,
    // Azure OpenAI takes the key in `api-key` (the AzureOpenAI client sends it there); Entra ID tokens come
    // as `Authorization: Bearer`.
    credentialHeaders: u.kind === 'azure' ? ['api-key', ...base.credentialHeaders] : base.credentialHeaders,
    endpoints: streamUsage
      ? base.endpoints
      : base.endpoints.map((row) => (row.injectStreamUsage ? { ...row, injectStreamUsage: false } : row)),
    ...(u.kind === 'openrouter' ? { priceAs: vendorModel } : {}),
  };
}
