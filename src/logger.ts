/** Structured JSON operational logs (pino, Fastify's own). Credentials are redacted by path as a backstop. */
import { pino, type Logger } from 'pino';

export function createLogger(level: string): Logger {
  return pino({
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
  });
}
