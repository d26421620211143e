/**
 * The console API's one error funnel: ApiError (and the store's domain errors, via the table in errors.ts)
 * → its status and code; anything unexpected → 500 internal_error.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../errors.js';
import { CONSOLE_ERRORS, fromDomainError, type ConsoleErrorCode } from './errors.js';

export function errorBody(code: string, message: string): { error: { code: string; message: string } } {
  return { error: { code, message } };
}

/** Fastify's own client errors (malformed JSON, body too large, …): status kept, message fixed. */
const FRAMEWORK_CODES: Record<number, ConsoleErrorCode> = {
  413: 'payload_too_large',
  415: 'unsupported_media_type',
};

export function handleConsoleError(
  error: unknown,
  request: FastifyRequest,
  reply: FastifyReply,
): FastifyReply {
  const known = error instanceof ApiError ? error : fromDomainError(error);
  if (known) {
    if (known.retryAfterSeconds !== undefined) reply.header('retry-after', String(known.retryAfterSeconds));
    return reply.code(known.status).send(errorBody(known.code, known.message));
  }
  const status = (error as { statusCode?: unknown } | null)?.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    // The framework's own status is kept (a 4xx other than these is a malformed request of some kind).
    const code = FRAMEWORK_CODES[status] ?? 'invalid_request';
    return reply.code(status).send(errorBody(code, CONSOLE_ERRORS[code].message));
  }
  request.log.error({ err: error }, 'console api: unexpected error');
  return reply.code(500).send(errorBody('internal_error', CONSOLE_ERRORS.internal_error.message));
}
