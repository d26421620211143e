/**
 * keyrelay's own errors: stable codes, one table, rendered once at the edge in the route's provider shape
 * (each provider module's `errorBody`) so SDKs raise their usual exception. Upstream errors never pass
 * through here.
 */
import type { Provider } from './types.js';
import { PROVIDERS } from './providers/index.js';

export const PROXY_ERRORS = {
  proxy_key_missing: { status: 401, message: 'Missing proxy-api-key header.' },
  proxy_key_invalid: { status: 401, message: 'Invalid proxy-api-key.' },
  proxy_key_revoked: { status: 401, message: 'This proxy-api-key has been revoked.' },
  proxy_key_expired: { status: 401, message: 'This proxy-api-key has expired.' },
  proxy_key_forbidden: { status: 403, message: 'This proxy-api-key may not use this provider or model.' },
  proxy_bad_request: { status: 400, message: 'Request refused by keyrelay.' },
  proxy_unknown_provider: {
    status: 404,
    message: 'Unknown provider; use /api/proxy/openai or /api/proxy/anthropic.',
  },
  proxy_body_too_large: { status: 413, message: 'Request body exceeds the configured limit.' },
  proxy_rate_limited: { status: 429, message: 'Rate limit for this proxy-api-key reached.' },
  proxy_budget_exceeded: { status: 429, message: 'Budget for this proxy-api-key exhausted.' },
  proxy_upstream_unreachable: { status: 502, message: 'Could not reach the upstream provider.' },
  proxy_upstream_timeout: { status: 504, message: 'The upstream provider did not answer in time.' },
  proxy_unavailable: { status: 503, message: 'keyrelay is unavailable (shutting down or overloaded).' },
  /** A failure of keyrelay's own while handling the request (a bug, or data it cannot read): never a bare 500. */
  proxy_internal_error: { status: 500, message: 'keyrelay failed while handling this request.' },
} as const;

export type ProxyErrorCode = keyof typeof PROXY_ERRORS;

export class ProxyError extends Error {
  override name = 'ProxyError';
  readonly status: number;
  constructor(
    readonly code: ProxyErrorCode,
    /** Extra detail for the caller; must never contain a credential or a full key. */
    detail?: string,
    readonly retryAfterSeconds?: number,
    options?: ErrorOptions,
  ) {
    super(detail ? `${PROXY_ERRORS[code].message} ${detail}` : PROXY_ERRORS[code].message, options);
    this.status = PROXY_ERRORS[code].status;
  }
}

/** The body keyrelay sends for its own error, shaped like the provider's (unknown provider → OpenAI shape). */
export function renderProxyError(provider: Provider | null, err: ProxyError): string {
  return PROVIDERS[provider ?? 'openai'].errorBody(err);
}

/** Errors of the console API: a code and a status, rendered as {"error": {"code", "message"}}. */
export class ApiError extends Error {
  override name = 'ApiError';
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
  }
}
