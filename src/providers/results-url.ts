/**
 * The second documented change to a response (docs/pricing.md, "Batches"; the first is stream usage):
 * Anthropic's batch objects name their results by an absolute `results_url` on the provider's host, which
 * the official SDK fetches as given — bypassing keyrelay and sending the caller's proxy-api-key to the
 * provider. In batch object responses that one field is rewritten to keyrelay's own address
 * (KEYRELAY_PUBLIC_URL), so results come through keyrelay and are priced. Nothing else in the body changes.
 */
import { Transform } from 'node:stream';
import { createBodyDecoder } from '../usage/index.js';
import { providerModule, type Provider } from './index.js';

/** Batch objects and lists are small; a larger body is passed on decoded but unchanged. */
const MAX_BODY_BYTES = 4 * 1024 * 1024;

/**
 * A transform that rewrites the results URL of a batch object response, or null when this response needs
 * none. Its output is identity-encoded: the caller must drop content-length and content-encoding.
 */
export function resultsUrlRewriter(
  provider: Provider,
  method: string,
  path: string,
  status: number,
  contentType: unknown,
  contentEncoding: string | undefined,
  proxyBase: string,
): Transform | null {
  const support = providerModule(provider).batches;
  const field = support?.resultsUrlField;
  if (!support || !field || status < 200 || status >= 300) return null;
  if (support.callOf(method, path)?.kind !== 'object') return null;
  if (typeof contentType !== 'string' || !contentType.toLowerCase().includes('json')) return null;
  const decoder = createBodyDecoder(contentEncoding);
  if (!decoder) return null; // an unknown coding: cannot look inside, pass it on untouched
  const parts: Buffer[] = [];
  let size = 0;
  let passing = false;
  // "results_url": "https://host/v1/messages/batches/<id>/results" → <proxyBase>/v1/messages/batches/<id>/results
  const pattern = new RegExp(
    `("${field}"\\s*:\\s*")https?://[^"/]+(/[^"]*/messages/batches/[^"/]+/results)"`,
    'g',
  );
  const rewrite = (text: string) =>
    text.replace(pattern, (_m, head: string, urlPath: string) => {
      const at = urlPath.indexOf('/messages/batches/');
      return `${head}${proxyBase}/v1${urlPath.slice(at)}"`;
    });
  const pull = (t: Transform) => {
    for (let piece = decoder.read(); piece; piece = decoder.read()) {
      if (passing) t.push(piece);
      else {
        parts.push(Buffer.from(piece));
        size += piece.length;
        if (size > MAX_BODY_BYTES) {
          passing = true;
          t.push(Buffer.concat(parts));
          parts.length = 0;
        }
      }
    }
  };
  const rewriter = new Transform({
    transform(chunk: Buffer, _enc, callback) {
      try {
        decoder.write(chunk, () => callback());
        pull(this); // an identity "decoder" has its piece ready at once
      } catch (err) {
        callback(err as Error);
      }
    },
    flush(callback) {
      decoder.end().then(
        () => {
          try {
            pull(this);
            decoder.close();
            if (!passing)
              this.push(Buffer.from(rewrite(Buffer.concat(parts, size).toString('utf8')), 'utf8'));
            callback();
          } catch (err) {
            callback(err as Error);
          }
        },
        (err: unknown) => callback(err as Error),
      );
    },
    destroy(err, callback) {
      decoder.close();
      callback(err);
    },
  });
  // A compressed body is decoded off the event loop: its pieces come when they are ready.
  decoder.onReadable(() => {
    try {
      pull(rewriter);
    } catch (err) {
      rewriter.destroy(err as Error);
    }
  });
  return rewriter;
}
