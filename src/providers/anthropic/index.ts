/** Anthropic: https://docs.anthropic.com/en/api */
import { readRateLimits, type ProviderModule } from '../types.js';
import { ANTHROPIC_BATCHES } from './batches.js';
import { readClaudeCodeUserId } from './claude-code.js';
import { MESSAGES_USAGE } from './usage.js';

/** Anthropic's error `type` for a status: https://docs.anthropic.com/en/api/errors */
const ERROR_TYPES: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
  502: 'api_error',
  503: 'overloaded_error',
  504: 'timeout_error',
};

function metadataUserId(body: Record<string, unknown>): string | null {
  const metadata = body.metadata;
  if (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata)) return null;
  const id = (metadata as Record<string, unknown>).user_id;
  return typeof id === 'string' && id !== '' ? id : null;
}

export const anthropic: ProviderModule<'anthropic'> = {
  id: 'anthropic',
  route: 'anthropic',
  genAiName: 'anthropic',
  priceProviderId: 'anthropic',
  freeToolFees: {
    web_fetches:
      'https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/web-fetch-tool#usage-and-pricing',
  },
  // The SDK sends `x-api-key`, or `Authorization: Bearer` with an auth token.
  credentialHeaders: ['x-api-key', 'authorization'],
  endpoints: [
    { match: /\/messages$/, class: 'messages', usage: MESSAGES_USAGE },
    { match: /\/complete$/, class: 'complete', usage: MESSAGES_USAGE },
    { match: /\/messages\/count_tokens$/, class: 'count_tokens', usage: null },
    { match: /\/messages\/batches(?:\/[^/]+(?:\/cancel|\/results)?)?$/, class: 'batches', usage: null },
    { match: /\/files(?:\/[^/]+(?:\/content)?)?$/, class: 'files', usage: null },
    { match: /\/models(?:\/[^/]+)?$/, class: 'models', usage: null },
  ],
  endUser: (body) => {
    const id = metadataUserId(body);
    if (id === null) return null;
    // Claude Code's value holds its session too: the end user is the account (or installation) alone.
    const claudeCode = readClaudeCodeUserId(id);
    return claudeCode ? claudeCode.user : id;
  },
  clientSession: (header, body) => {
    const id = body ? metadataUserId(body) : null;
    return (
      header('x-claude-code-session-id') ?? (id === null ? null : readClaudeCodeUserId(id)?.session) ?? null
    );
  },
  // https://docs.anthropic.com/en/api/rate-limits#response-headers
  rateLimits: (headers) =>
    readRateLimits(
      headers,
      ['requests', 'tokens', 'input_tokens', 'output_tokens'],
      (name, part) => `anthropic-ratelimit-${name.replace('_', '-')}-${part}`,
    ),
  errorBody: (err) =>
    JSON.stringify({
      type: 'error',
      error: { type: ERROR_TYPES[err.status] ?? 'api_error', message: `${err.message} (${err.code})` },
    }),
  socket: null,
  batches: ANTHROPIC_BATCHES,
};
