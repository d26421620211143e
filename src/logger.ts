/**
 * Operational logs (pino, Fastify's own): JSON lines for machines, or, on a terminal, short readable lines
 * for the person watching (KEYRELAY_LOG_FORMAT). Credentials are redacted by path as a backstop.
 */
import { LogController, type FastifyReply, type FastifyRequest } from 'fastify';
import { pino, type DestinationStream, type Logger } from 'pino';

export type LogFormat = 'auto' | 'json' | 'pretty';

/** Whether logs come out as readable lines: asked for, or auto on a terminal. */
export function isPretty(format: LogFormat, stream: { isTTY?: boolean } = process.stdout): boolean {
  return format === 'pretty' || (format === 'auto' && stream.isTTY === true);
}

const LEVELS: Record<number, string> = {
  10: 'TRACE',
  20: 'DEBUG',
  30: 'INFO',
  40: 'WARN',
  50: 'ERROR',
  60: 'FATAL',
};
const HIDDEN = new Set(['level', 'time', 'pid', 'hostname', 'msg', 'v']);

/** One pino JSON line as `12:00:01 INFO  message key=value …`. */
export function prettyLine(json: string): string {
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json;
  }
  const time = new Date(typeof o.time === 'number' ? o.time : Date.now()).toISOString().slice(11, 19);
  const level = (LEVELS[o.level as number] ?? String(o.level)).padEnd(5);
  const req = o.req as { method?: string; url?: string } | undefined;
  const res = o.res as { statusCode?: number } | undefined;
  const parts: string[] = [];
  if (req?.method) parts.push(`${req.method} ${req.url}`);
  if (res?.statusCode) parts.push(String(res.statusCode));
  for (const [k, v] of Object.entries(o)) {
    if (HIDDEN.has(k) || k === 'req' || k === 'res' || k === 'reqId') continue;
    if (k === 'err' && v && typeof v === 'object') {
      const e = v as { message?: string; stack?: string };
      parts.push(`\n  ${e.stack ?? e.message ?? JSON.stringify(v)}`);
      continue;
    }
    parts.push(`${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`);
  }
  return `${time} ${level} ${typeof o.msg === 'string' ? o.msg : ''}${parts.length ? '  ' + parts.join(' ') : ''}\n`;
}

function prettyStream(out: NodeJS.WritableStream): DestinationStream {
  return { write: (line: string) => void out.write(prettyLine(line)) };
}

export function createLogger(level: string, format: LogFormat = 'json'): Logger {
  const options = {
    level,
    redact: {
      paths: [
        'req.headers.authorization',
        'req.headers["x-api-key"]',
        'req.headers["proxy-api-key"]',
        'req.headers.cookie',
        'headers.authorization',
        'headers["x-api-key"]',
        'headers["proxy-api-key"]',
      ],
      censor: '[redacted]',
    },
  };
  return isPretty(format) ? pino(options, prettyStream(process.stdout)) : pino(options);
}

/**
 * Fastify's request lines: one per request, when it completes, with method, path and status. The console's
 * own files and pages (GET outside /api/, answered fine) go at debug: a page load is a dozen of them.
 */
export class RequestLogController extends LogController {
  override incomingRequest(request: FastifyRequest): void {
    request.log.trace({ req: { method: request.method, url: request.url } }, 'incoming request');
  }

  override requestCompleted(error: Error | null, request: FastifyRequest, reply: FastifyReply): void {
    const line = {
      req: { method: request.method, url: request.url },
      res: { statusCode: reply.statusCode },
      ms: Math.round(reply.elapsedTime * 10) / 10,
    };
    if (error) return reply.log.error({ ...line, err: error }, 'request errored');
    const asset = request.method === 'GET' && !request.url.startsWith('/api/') && reply.statusCode < 400;
    reply.log[asset ? 'debug' : 'info'](line, 'request');
  }
}
