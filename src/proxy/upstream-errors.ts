/** Maps undici's failure codes to keyrelay's errors and log outcomes. */
import { ProxyError } from '../errors.js';
import type { Outcome } from '../types.js';

export interface UpstreamFailure {
  error: ProxyError;
  outcome: Outcome;
  kind: 'connect' | 'timeout' | 'dropped';
}

const TIMEOUT_CODES = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);

export function classifyUpstreamError(err: unknown): UpstreamFailure {
  const code = typeof err === 'object' && err !== null && 'code' in err ? String(err.code) : '';
  if (TIMEOUT_CODES.has(code)) {
    return { error: new ProxyError('proxy_upstream_timeout'), outcome: 'timeout', kind: 'timeout' };
  }
  if (code === 'UND_ERR_SOCKET' || code === 'ECONNRESET' || code === 'UND_ERR_RES_CONTENT_LENGTH_MISMATCH') {
    return {
      error: new ProxyError('proxy_upstream_unreachable'),
      outcome: 'upstream_error',
      kind: 'dropped',
    };
  }
  return { error: new ProxyError('proxy_upstream_unreachable'), outcome: 'upstream_error', kind: 'connect' };
}
