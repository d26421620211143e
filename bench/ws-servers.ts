/**
 * The WebSocket bench's other processes. `echo`: the upstream, echoing every message as it came (text stays
 * text). `bare <upstream-origin>`: the reference relay, the least a Node WebSocket proxy can do with `ws` on
 * both sides: no key, no limits, no log, messages forwarded as they come. Prints `{"port":N}` once listening.
 */
import { createServer, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocket, WebSocketServer } from 'ws';

const [mode, upstream] = process.argv.slice(2);
const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, clientTracking: false });
const server = createServer((_req, res) => res.writeHead(200).end('ok'));

if (mode === 'echo') {
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) =>
    wss.handleUpgrade(req, socket, head, (ws) => {
      ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }));
      ws.on('error', () => {});
    }),
  );
} else if (mode === 'bare' && upstream) {
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const up = new WebSocket(upstream.replace(/^http/, 'ws') + (req.url ?? '/'), {
      perMessageDeflate: false,
    });
    up.on('error', () => socket.destroy());
    up.once('open', () =>
      wss.handleUpgrade(req, socket, head, (ws) => {
        ws.on('message', (data, isBinary) => up.send(data, { binary: isBinary }));
        up.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }));
        ws.on('close', () => up.close());
        up.on('close', () => ws.close());
        ws.on('error', () => {});
      }),
    );
  });
} else {
  throw new Error('usage: ws-servers.ts echo | bare <upstream-origin>');
}

server.listen(0, '127.0.0.1', () => {
  const addr = server.address();
  process.stdout.write(`${JSON.stringify({ port: typeof addr === 'object' && addr ? addr.port : 0 })}\n`);
});
