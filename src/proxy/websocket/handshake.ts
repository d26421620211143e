/**
 * The HTTP half of a WebSocket: what the upgrade request carries upstream, how the key may arrive, and
 * answers written straight onto the raw socket (before an upgrade there is no ServerResponse to use).
 */
import { STATUS_CODES, type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { forwardRequestHeaders } from '../headers.js';

/** The browser form of the key: a subprotocol entry, since a browser cannot set headers on a WebSocket. */
export const KEY_PROTOCOL_PREFIX = 'keyrelay-key.';

/** Handshake fields each hop negotiates itself; ws sets upstream's from the protocols and its own key. */
const HANDSHAKE_FIELDS = new Set([
  'sec-websocket-key',
  'sec-websocket-version',
  'sec-websocket-extensions',
  'sec-websocket-protocol',
  'sec-websocket-accept',
]);

export interface OfferedProtocols {
  /** Every entry except keyrelay's own, in the caller's order: these go upstream. */
  forward: string[];
  /** The keys found in `keyrelay-key.` entries (more than one is refused). */
  keys: string[];
  /** Every entry a token (RFC 6455 §4.1), none repeated: what ws's server insists on after the fact. */
  valid: boolean;
}

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

export function splitProtocols(header: string | string[] | undefined): OfferedProtocols {
  const out: OfferedProtocols = { forward: [], keys: [], valid: true };
  const seen = new Set<string>();
  for (const line of Array.isArray(header) ? header : header ? [header] : []) {
    for (const raw of line.split(',')) {
      const p = raw.trim();
      if (!p) continue;
      if (!TOKEN.test(p) || seen.has(p)) out.valid = false;
      seen.add(p);
      if (p.startsWith(KEY_PROTOCOL_PREFIX)) out.keys.push(p.slice(KEY_PROTOCOL_PREFIX.length));
      else out.forward.push(p);
    }
  }
  return out;
}

/**
 * The caller's headers for the upstream handshake, by the HTTP path's rules (headers.ts: names, values and
 * order as sent, credentials and hop-by-hop fields dropped) minus the handshake's own fields. ws takes an object: a repeated name becomes an array, sent as repeated lines.
 */
export function upstreamHandshakeHeaders(req: IncomingMessage): Record<string, string | string[]> {
  const flat = forwardRequestHeaders(req.rawHeaders, req.headers.connection);
  const out: Record<string, string | string[]> = {};
  for (let i = 0; i < flat.length; i += 2) {
    const name = flat[i]!;
    if (HANDSHAKE_FIELDS.has(name.toLowerCase())) continue;
    const prev = out[name];
    out[name] = prev === undefined ? flat[i + 1]! : [...(Array.isArray(prev) ? prev : [prev]), flat[i + 1]!];
  }
  return out;
}

const WS_KEY = /^[+/0-9A-Za-z]{22}==$/;

/** What ws's server would refuse anyway; checked before anything goes upstream. */
export function handshakeProblem(req: IncomingMessage): string | null {
  if (req.method !== 'GET') return 'A WebSocket upgrade must be a GET.';
  if ((req.headers.upgrade ?? '').toLowerCase() !== 'websocket')
    return 'Only WebSocket upgrades are relayed.';
  const key = req.headers['sec-websocket-key'];
  if (typeof key !== 'string' || !WS_KEY.test(key.trim())) return 'Missing or invalid Sec-WebSocket-Key.';
  const version = req.headers['sec-websocket-version'];
  if (version !== '13' && version !== '8') return 'Unsupported Sec-WebSocket-Version.';
  return null;
}

/** Writes a complete HTTP/1.1 response on a not-upgraded socket and closes it once sent (framing is ours). */
export function writeRawResponse(
  socket: Duplex,
  status: number,
  headers: [string, string][],
  body: Buffer,
  statusMessage?: string,
): void {
  if (socket.destroyed || !socket.writable) return void socket.destroy();
  let head = `HTTP/1.1 ${status} ${statusMessage ?? STATUS_CODES[status] ?? ''}\r\n`;
  for (const [name, value] of headers) {
    if (name.toLowerCase() !== 'content-length') head += `${name}: ${value}\r\n`;
  }
  head += `content-length: ${body.length}\r\nconnection: close\r\n\r\n`;
  socket.end(Buffer.concat([Buffer.from(head, 'latin1'), body]));
  // A caller that never reads must not keep the socket for ever.
  setTimeout(() => socket.destroy(), 5_000).unref();
}

const RESPONSE_DROP = new Set([
  'connection',
  'keep-alive',
  'transfer-encoding',
  'content-length',
  'upgrade',
  'proxy-connection',
  'trailer',
  'set-cookie',
  'alt-svc',
]);

/** Upstream's answer to a refused upgrade, as raw header lines for the caller (framing redone by us). */
export function passBackHeaders(rawHeaders: readonly string[]): [string, string][] {
  const out: [string, string][] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (!RESPONSE_DROP.has(rawHeaders[i]!.toLowerCase())) out.push([rawHeaders[i]!, rawHeaders[i + 1]!]);
  }
  return out;
}

/** Upstream's 101 headers worth showing the caller (request ids, rate-limit hints), not the handshake's own. */
export function upgradeHeadersForCaller(headers: IncomingHttpHeaders): string[] {
  const lines: string[] = [];
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || RESPONSE_DROP.has(name) || HANDSHAKE_FIELDS.has(name)) continue;
    for (const v of Array.isArray(value) ? value : [value]) lines.push(`${name}: ${v}`);
  }
  return lines;
}
