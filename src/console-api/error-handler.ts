/** The console API's one error funnel: ApiError → its status and code; anything unexpected → a bare 500. */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../errors.js';

export function errorBody(code: string, message: string): { error: { code: string; message: string } } {
  return { error: { code, message } };
}

/** Fastify's own client errors (malformed JSON, body too large, …): status kept, message fixed. */
const FRAMEWORK_CODES: Record<number, [string, string]> = {
  413: ['payload_too_large', 'Request body too large.'],
  415: ['unsupported_media_type', 'Send the body as application/json.'],
};

export function handleConsoleError(
  error: unknown,
  request: FastifyRequest,
  reply: FastifyReply,
): FastifyReply {
  if (error instanceof ApiError) {
    if (error.retryAfterSeconds !== undefined) reply.header('retry-after', String(error.retryAfterSeconds));
    return reply.code(error.status).send(errorBody(error.code, error.message));
  }
  const status = (error as { statusCode?: unknown } | null)?.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    const [code, message] = FRAMEWORK_CODES[status] ?? ['invalid_request', 'Malformed request.'];
    return reply.code(status).send(errorBody(code, message));
  }
  request.log.error({ err: error }, 'console api: unexpected error');
  return reply.code(500).send(errorBody('internal_error', 'Internal error.'));
}
