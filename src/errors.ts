/**
 * keyrelay's own errors: one type (`DomainError`: a stable code, a message, details), codes in two tables,
 * and each edge mapping a code to its answer once: the proxy by PROXY_ERRORS (status, rendered in the route's
 * provider shape by each provider module's `errorBody`, so SDKs raise their usual exception), the console API
 * by its own table (console-api/errors.ts), the CLI by exit code (cli/commands.ts). Every code is listed in
 * docs/errors.md. Upstream errors never pass through here.
 */
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
  /** A WebSocket upgrade outside the proxy's routes (an HTTP request there is the console's). */
  proxy_not_found: {
    status: 404,
    message: 'No such route; keyrelay proxies paths under /api/proxy/<provider>/.',
  },
  /** A provider API path without the proxy prefix: an SDK whose base URL is keyrelay's bare address. */
  wrong_base_url: { status: 404, message: "This is keyrelay, not the provider's API." },
} as const;

export type ProxyErrorCode = keyof typeof PROXY_ERRORS;

/**
 * What keys/, accounts/, limits/ and store/ refuse, by stable code, with the message a person reads; no
 * status: the console API maps each code to one (console-api/errors.ts), the CLI to an exit code.
 */
export const DOMAIN_ERRORS = {
  invalid_email: 'Enter a valid email address.',
  weak_password: 'Password is too weak.',
  invalid_name: 'Key name must be 1–100 characters.',
  invalid_grace: 'Grace period must be 0–86400 seconds.',
  invalid_limits: 'Invalid key limits.',
  invalid_time: 'Not an ISO-8601 time.',
  invalid_cursor: 'Invalid cursor.',
  invalid_sort:
    'Search results come newest first here: this log has no full-text index (KEYRELAY_LOG_SEARCH=false). Sort newest first, or clear the search.',
  signup_closed: 'Sign-up is closed.',
  key_not_found: 'No such key.',
  email_taken: 'An account with this email already exists.',
  key_not_active: 'Only an active key can be rolled.',
  invalid_org_name: 'Organization name must be 1–100 characters.',
  forbidden: 'Your role in this organization does not allow this.',
  org_not_found: 'No such organization.',
  member_not_found: 'No such member in this organization.',
  invite_invalid: 'This invitation is unknown, used or expired.',
  already_member: 'You are already a member of this organization.',
  last_owner: 'An organization keeps at least one owner.',
  invalid_sso: 'Invalid single sign-on settings.',
  sso_domain_taken: 'Another organization signs in people of this email domain.',
  sso_unavailable: 'The identity provider could not be reached.',
  invalid_alert_rule: 'Invalid alert rule.',
  alert_target_refused: 'Webhook URL refused.',
  alert_rule_not_found: 'No such alert rule.',
} as const;

export type DomainErrorCode = keyof typeof DOMAIN_ERRORS;
export type ErrorCode = DomainErrorCode | ProxyErrorCode;
/** Facts about the error for a program (the field a value was refused for, …); never a credential. */
export type ErrorDetails = Readonly<Record<string, string | number | boolean | null>>;

/**
 * keyrelay's one error type. The hot path's refusals (keys/verify.ts, limits/) are ProxyErrors, this type
 * with the proxy's codes, returned rather than thrown; the rest of the domain throws it.
 */
export class DomainError<C extends ErrorCode = DomainErrorCode> extends Error {
  override name = 'DomainError';
  constructor(
    readonly code: C,
    message: string,
    readonly details?: ErrorDetails,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** The domain's refusal by code; `message` replaces the table's when it says more. */
export function domainError(code: DomainErrorCode, message?: string, details?: ErrorDetails): DomainError {
  return new DomainError(code, message ?? DOMAIN_ERRORS[code], details);
}

/** Whether `err` is a DomainError with one of the domain's codes (not the proxy's). */
export function isDomainError(err: unknown): err is DomainError {
  return err instanceof DomainError && Object.hasOwn(DOMAIN_ERRORS, (err as DomainError<ErrorCode>).code);
}

/** A refusal in the proxy's codes; its status and message come from PROXY_ERRORS. */
export class ProxyError extends DomainError<ProxyErrorCode> {
  override name = 'ProxyError';
  readonly status: number;
  constructor(
    code: ProxyErrorCode,
    /** Extra detail for the caller; must never contain a credential or a full key. */
    detail?: string,
    readonly retryAfterSeconds?: number,
    options?: ErrorOptions,
  ) {
    super(
      code,
      detail ? `${PROXY_ERRORS[code].message} ${detail}` : PROXY_ERRORS[code].message,
      undefined,
      options,
    );
    this.status = PROXY_ERRORS[code].status;
  }
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

/**
 * `wrong_base_url`'s body. The path names no provider, so it is OpenAI's shape (`error.code`) and
 * Anthropic's (`type: "error"`, `error.type`) at once: either SDK shows the message.
 */
export function renderWrongBaseUrl(err: ProxyError): string {
  return JSON.stringify({
    type: 'error',
    error: { type: 'invalid_request_error', code: err.code, param: null, message: err.message },
  });
}
