/**
 * The collector of the bench's "kr otel" column: an OTLP/HTTP endpoint that reads each export and answers
 * 200 with an empty success, as a healthy collector does, so what is measured is keyrelay's own cost of
 * making and exporting spans and metrics. Prints `{"port":N}` on stdout once listening.
 */
import { createServer } from 'node:http';

let exports = 0;
const server = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    exports += 1;
    const json = (req.headers['content-type'] ?? '').startsWith('application/json');
    res.writeHead(200, { 'content-type': json ? 'application/json' : 'application/x-protobuf' });
    res.end(json ? '{}' : '');
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => {
  const addr = server.address();
  process.stdout.write(`${JSON.stringify({ port: typeof addr === 'object' && addr ? addr.port : 0 })}\n`);
});
process.on('SIGTERM', () => {
  process.stderr.write(`[otlp-sink] ${exports} exports received\n`);
  process.exit(0);
});
