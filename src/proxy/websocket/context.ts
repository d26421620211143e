/** What the WebSocket proxy is given: the HTTP proxy's services, less its pool (sockets open their own). */
import type { Hold } from '../../limits/limiter.js';
import type { RequestLogRow } from '../../types.js';
import type { ProxyServices } from '../context.js';

export type WsProxyContext = Omit<ProxyServices, 'dispatcher'>;

/** Hands a socket's row (and a response's hold, if any) to the log, the metrics and the limits. */
/** A row to record; a response's row comes with its hold and why it ended (`gen_ai.response.finish_reasons`). */
export type EmitRow = (row: RequestLogRow, hold?: Hold | null, finishReasons?: readonly string[]) => void;
