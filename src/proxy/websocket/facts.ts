/** What a relayed socket's rows are built from: the route, the key, and the upgrade request as the log may see it. */
import type { IncomingMessage } from 'node:http';
import { BUILTIN_PROVIDERS, providerCredential, providerModule } from '../../providers/index.js';
import type { KeyRecord } from '../../store/types.js';
import type { Provider } from '../../types.js';
import { keepsBodies } from '../exchange.js';
import type { WsProxyContext } from './context.js';
import { splitProtocols } from './handshake.js';
import type { SocketFacts } from './ledger.js';

/** An upgrade's identity and clock, and what admission has learned of it (admission.ts `Arrival`). */
export interface SocketArrival {
  readonly id: string;
  readonly createdAt: string;
  readonly startedAt: number;
  provider: Provider | null;
  path: string;
  key: KeyRecord | null;
}

export function socketFacts(
  ctx: WsProxyContext,
  req: IncomingMessage,
  a: SocketArrival,
  provider: Provider,
  key: KeyRecord,
): SocketFacts {
  const events = providerModule(provider).socket;
  const offered = splitProtocols(req.headers['sec-websocket-protocol']);
  const credentialProtocol = events?.credentialSubprotocol;
  const prefix = credentialProtocol ? `${credentialProtocol}.` : null;
  const inProtocol = prefix ? offered.forward.find((p) => p.startsWith(prefix)) : undefined;
  const credential =
    providerCredential(provider, req.headers) ??
    (prefix && inProtocol ? inProtocol.slice(prefix.length) : null);
  return {
    id: a.id,
    createdAt: a.createdAt,
    startedAt: a.startedAt,
    provider,
    path: a.path,
    key,
    req: redactedRequest(req),
    protocol: events?.protocolOf(a.path) ?? 'other',
    events,
    logBodies: keepsBodies(ctx.config, req.headers),
    endUser: null,
    credentialFingerprint: credential ? ctx.fingerprint(credential) : null,
  };
}

/**
 * Subprotocol names whose entries carry a credential: keyrelay's key, and any provider's (whatever the
 * route; a named upstream's socket events are its shape's).
 */
const CREDENTIAL_PROTOCOLS = new Set(
  ['keyrelay-key', ...Object.values(BUILTIN_PROVIDERS).map((m) => m.socket?.credentialSubprotocol)].filter(
    (p): p is string => !!p,
  ),
);

function redactProtocol(entry: string): string {
  const dot = entry.indexOf('.');
  return dot > 0 && CREDENTIAL_PROTOCOLS.has(entry.slice(0, dot))
    ? `${entry.slice(0, dot)}.[redacted]`
    : entry;
}

/** The upgrade request as the log sees it: subprotocol entries that carry a key keep their name only. */
function redactedRequest(req: IncomingMessage): IncomingMessage {
  const proto = req.headers['sec-websocket-protocol'];
  if (proto === undefined) return req;
  const redacted = (Array.isArray(proto) ? proto.join(',') : proto)
    .split(',')
    .map((p) => redactProtocol(p.trim()))
    .join(', ');
  const headers = { ...req.headers, 'sec-websocket-protocol': redacted };
  return { headers, method: req.method, socket: req.socket, rawHeaders: req.rawHeaders } as IncomingMessage;
}
