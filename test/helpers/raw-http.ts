/**
 * A raw HTTP/1.1 client on node:net, for what undici will not send or hides: absolute-form targets, repeated
 * Host headers, hop-by-hop request headers, the exact response header bytes, and whether a response really
 * ended (terminating chunk / full content-length) or was cut.
 */
import { connect } from 'node:net';

export interface RawResponse {
  status: number;
  /** Header lines as received, in order, name case kept. */
  rawHeaders: [string, string][];
  /** Lower-cased names, every value kept. */
  headers: Record<string, string[]>;
  /** The body after de-chunking (content-encoding untouched). */
  body: Buffer;
  /** True only if the framing said the body was complete (last chunk or full content-length). */
  complete: boolean;
}

function parseHead(head: string): Pick<RawResponse, 'status' | 'rawHeaders' | 'headers'> {
  const [statusLine, ...lines] = head.split('\r\n');
  const status = Number(statusLine!.split(' ')[1]);
  const rawHeaders: [string, string][] = [];
  const headers: Record<string, string[]> = {};
  for (const line of lines) {
    const i = line.indexOf(':');
    const name = line.slice(0, i);
    const value = line.slice(i + 1).trim();
    rawHeaders.push([name, value]);
    (headers[name.toLowerCase()] ??= []).push(value);
  }
  return { status, rawHeaders, headers };
}

/** Decodes a chunked body; `done` only when the zero-length last chunk arrived. */
function dechunk(buf: Buffer): { body: Buffer; done: boolean } {
  const parts: Buffer[] = [];
  let pos = 0;
  for (;;) {
    const eol = buf.indexOf('\r\n', pos);
    if (eol === -1) return { body: Buffer.concat(parts), done: false };
    const size = Number.parseInt(buf.subarray(pos, eol).toString('latin1'), 16);
    if (size === 0) return { body: Buffer.concat(parts), done: buf.indexOf('\r\n\r\n', eol) !== -1 };
    if (buf.length < eol + 2 + size + 2) {
      parts.push(buf.subarray(eol + 2, Math.min(buf.length, eol + 2 + size)));
      return { body: Buffer.concat(parts), done: false };
    }
    parts.push(buf.subarray(eol + 2, eol + 2 + size));
    pos = eol + 2 + size + 2;
  }
}

function interpret(data: Buffer, method: string): RawResponse | null {
  const end = data.indexOf('\r\n\r\n');
  if (end === -1) return null;
  const head = parseHead(data.subarray(0, end).toString('latin1'));
  const rest = data.subarray(end + 4);
  const noBody = method === 'HEAD' || head.status === 204 || head.status === 304;
  if (noBody) return { ...head, body: Buffer.alloc(0), complete: true };
  if (head.headers['transfer-encoding']?.some((v) => v.toLowerCase().includes('chunked'))) {
    const { body, done } = dechunk(rest);
    return { ...head, body, complete: done };
  }
  const length = head.headers['content-length'];
  if (length) {
    const n = Number(length[0]);
    return { ...head, body: rest.subarray(0, n), complete: rest.length >= n };
  }
  return { ...head, body: rest, complete: false };
}

/**
 * Sends `request` as-is and resolves with the first response once it is complete or the socket closed.
 * `complete: false` means the server ended the connection before the framing said the body was done.
 */
export function rawExchange(
  port: number,
  request: string | Buffer,
  timeoutMs = 15_000,
): Promise<RawResponse> {
  const method = request.toString('latin1').split(' ')[0] ?? 'GET';
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let data = Buffer.alloc(0);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`raw exchange timed out; got ${data.length} bytes`));
    }, timeoutMs);
    const settle = (res: RawResponse) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(res);
    };
    socket.on('data', (chunk: Buffer) => {
      data = Buffer.concat([data, chunk]);
      const res = interpret(data, method);
      if (res?.complete) settle(res);
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      const res = interpret(data, method);
      if (res) settle(res);
      else {
        clearTimeout(timer);
        reject(new Error(`connection closed without a response (${data.length} bytes)`));
      }
    });
    socket.write(request);
  });
}

/** An HTTP/1.1 request head from a list of header lines (kept exactly), ending with an empty line. */
export function rawHead(requestLine: string, headerLines: string[]): string {
  return [requestLine, ...headerLines, '', ''].join('\r\n');
}
