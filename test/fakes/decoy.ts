import { createServer, type AddressInfo, type Socket } from 'node:net';

/** A listener that only counts: proof that a refused request never reached any upstream. */
export interface Decoy {
  /** http://127.0.0.1:PORT */
  url: string;
  port: number;
  /** TCP connections accepted so far. */
  readonly connections: number;
  /** When each connection arrived (Date.now()). */
  connectedAt: number[];
  close(): Promise<void>;
}

export async function startDecoy(): Promise<Decoy> {
  const sockets = new Set<Socket>();
  const connectedAt: number[] = [];
  const server = createServer((socket) => {
    connectedAt.push(Date.now());
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    // Answer anything at once so a wrongly forwarded request fails loudly instead of hanging the test.
    socket.once('data', () => {
      socket.end(
        'HTTP/1.1 599 Decoy\r\ncontent-type: text/plain\r\ncontent-length: 5\r\nconnection: close\r\n\r\ndecoy',
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    get connections() {
      return connectedAt.length;
    },
    connectedAt,
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const s of sockets) s.destroy();
      await closed;
    },
  };
}
