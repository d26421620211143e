/** The upstream connection pool: one undici Agent shared by every proxied request. */
import { Agent } from 'undici';

/** A provider's edge answers a TCP+TLS handshake in well under a second; 10 s means it is down. */
export const CONNECT_TIMEOUT_MS = 10_000;

/**
 * How long an idle upstream connection is kept for reuse, at most. A provider's Keep-Alive hint can shorten
 * it, never lengthen it: after a burst of 1,000 streams, a long hint held 1,000 idle sockets (~8 KB of heap
 * each over plain HTTP, more with TLS) for as long as it said. 30 s spans the gaps of a busy client.
 */
export const UPSTREAM_KEEPALIVE_MS = 30_000;

export function upstreamAgent(keepAliveMs = UPSTREAM_KEEPALIVE_MS): Agent {
  return new Agent({
    connect: { timeout: CONNECT_TIMEOUT_MS },
    keepAliveTimeout: keepAliveMs,
    keepAliveMaxTimeout: keepAliveMs,
    // undici's own limits must not cut long generations: ours (headers/idle) are passed per request.
    headersTimeout: 0,
    bodyTimeout: 0,
  });
}
