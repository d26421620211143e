/** Reads a request body into memory, bounded: usage parsing and body logging need it whole anyway. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ProxyError } from '../errors.js';
import { askForBody } from '../http-guard.js';

export function readBody(req: IncomingMessage, res: ServerResponse, limit: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (declared > limit) return Promise.reject(new ProxyError('proxy_body_too_large'));
  // A client that sent `Expect: 100-continue` is told to send its body only now, once its key and the
  // declared length are accepted: a refusal costs it no upload.
  askForBody(req, res);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        cleanup();
        req.resume();
        reject(new ProxyError('proxy_body_too_large'));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    };
    const onError = (err: Error) => {
      cleanup();
      reject(err);
    };
    const cleanup = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('aborted', onAborted);
    };
    const onAborted = () => onError(new Error('client aborted while sending the body'));
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('aborted', onAborted);
  });
}
