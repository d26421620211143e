/**
 * The caller's side of the handshake, once upstream has accepted: ws answers the caller's upgrade with a
 * 101 carrying upstream's headers, keyrelay's ids and exactly the subprotocol upstream chose.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import WebSocket, { WebSocketServer } from 'ws';

export class CallerHandshakes {
  private readonly wss: WebSocketServer;
  private readonly chosenProtocol = new WeakMap<IncomingMessage, string>();
  /** Header lines for the caller's 101, per request: upstream's headers and our ids. */
  private readonly extraHeaders = new WeakMap<IncomingMessage, string[]>();

  constructor(maxPayload: number) {
    this.wss = new WebSocketServer({
      noServer: true,
      perMessageDeflate: false,
      maxPayload,
      autoPong: false,
      clientTracking: false,
      // The caller gets exactly the subprotocol upstream accepted (ws would otherwise pick the first offered,
      // which may be the keyrelay-key entry).
      handleProtocols: (_offered, req) => this.chosenProtocol.get(req) || false,
    });
    this.wss.on('headers', (headers, req) => headers.push(...(this.extraHeaders.get(req) ?? [])));
  }

  /**
   * Completes the caller's handshake; null when ws found the socket unusable (it destroys it without
   * calling back). `takeEarly` hands over what the caller sent so far, and stops reading it, in the same
   * tick as ws attaches its own reader: nothing arrives in between.
   */
  accept(
    req: IncomingMessage,
    socket: Duplex,
    takeEarly: () => Buffer,
    headers: string[],
    protocol: string | undefined,
  ): Promise<WebSocket | null> {
    this.extraHeaders.set(req, headers);
    if (protocol) this.chosenProtocol.set(req, protocol);
    return new Promise((resolve) => {
      const onClose = () => resolve(null);
      socket.once('close', onClose);
      this.wss.handleUpgrade(req, socket, takeEarly(), (ws) => {
        socket.off('close', onClose);
        resolve(ws);
      });
    });
  }

  close(): void {
    this.wss.close();
  }
}
