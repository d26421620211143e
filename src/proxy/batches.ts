/**
 * Batches through the proxy (docs/pricing.md "Batches"): batch objects are recorded against the
 * key (created through keyrelay, or first seen), and a results download is priced line by line at the batch
 * rate and recorded once per batch — the first complete download's row carries the batch's total, so the
 * key's spend rises once; later downloads cost 0 and say whose row counted it.
 */
import { upstreamOrigin } from '../config.js';
import type { IncomingMessage } from 'node:http';
import type { Logger } from 'pino';
import { ProxyError } from '../errors.js';
import type { KeyRecord } from '../store/types.js';
import type { Provider } from '../types.js';
import { providerModule } from '../providers/index.js';
import type { BatchCall, BatchObject } from '../providers/types.js';
import type { BatchStore } from '../store/batch-types.js';
import { BatchInputReader, BatchResultsReader, NOT_BILLED, type RequestInfo } from '../metering/index.js';
import { HeadTail, isRecord, PARTIAL } from '../usage/index.js';
import type { ProxyServices } from './context.js';
import type { Exchange } from './exchange.js';
import { forwardRequestHeaders } from './headers.js';

/** Batch objects and lists are small; a body past this is not read for batches (still forwarded). */
const MAX_OBJECT_BYTES = 4 * 1024 * 1024;
/** OpenAI's own limit for a batch input file (200 MB): a larger one cannot be a batch upstream would run. */
const MAX_BATCH_INPUT_BYTES = 200 * 1024 * 1024;

export interface BatchObserver {
  push(decoded: Buffer): void;
  cut(): void;
  /** Records what passed, and sets the exchange's cost when it downloaded results. Never throws. */
  settle(ex: Exchange, complete: boolean): Promise<void>;
}

export interface BatchContext {
  batches?: BatchStore | null;
  log: Pick<Logger, 'warn'>;
  maxLineBytes: number;
}

export function batchObserver(
  ctx: BatchContext,
  provider: Provider,
  method: string,
  path: string,
  status: number,
): BatchObserver | null {
  const support = providerModule(provider).batches;
  const store = ctx.batches;
  if (!support || !store || status < 200 || status >= 300) return null;
  const call = support.callOf(method, path);
  if (!call) return null;
  return call.kind === 'object'
    ? objectObserver(ctx, store, provider, call.create)
    : resultsObserver(
        ctx,
        store,
        provider,
        call,
        new BatchResultsReader(provider, support, ctx.maxLineBytes),
      );
}

function objectObserver(
  ctx: BatchContext,
  store: BatchStore,
  provider: Provider,
  create: boolean,
): BatchObserver {
  const body = new HeadTail(MAX_OBJECT_BYTES, 0);
  let cut = false;
  return {
    push: (piece) => body.add(piece),
    cut: () => void (cut = true),
    async settle(ex, complete) {
      const { whole } = body.read();
      if (!complete || cut || whole === null) return;
      let parsed: unknown;
      try {
        parsed = JSON.parse(whole) as unknown;
      } catch {
        return; // not a batch body: nothing to record
      }
      if (!isRecord(parsed)) return;
      const support = providerModule(provider).batches!;
      const items = Array.isArray(parsed.data) ? parsed.data : [parsed];
      const seen = items
        .map((o) => (isRecord(o) ? support.readObject(o) : null))
        .filter((b): b is BatchObject => b !== null);
      try {
        for (const b of seen) {
          await store.upsertBatch({
            provider,
            batch_id: b.id,
            key_id: ex.key!.id,
            account_id: ex.key!.account_id,
            at: ex.createdAt,
            created_here: create && seen.length === 1,
            status: b.status,
            request_counts: b.request_counts,
            output_file_id: b.output_file_id,
          });
        }
      } catch (err) {
        ctx.log.warn({ err, reqId: ex.id }, 'batch could not be recorded');
      }
    },
  };
}

function resultsObserver(
  ctx: BatchContext,
  store: BatchStore,
  provider: Provider,
  call: Extract<BatchCall, { kind: 'results' | 'file_content' }>,
  reader: BatchResultsReader,
): BatchObserver {
  let cut = false;
  return {
    push: (piece) => reader.push(piece),
    cut: () => void (cut = true),
    async settle(ex, complete) {
      reader.end();
      const t = reader.totals;
      // A file that holds no result lines is some other file: an ordinary, unbilled download.
      if (call.kind === 'file_content' && t.results === 0) return;
      if (!complete || cut) {
        ex.priced = {
          cost_usd: null,
          price_source: `${NOT_BILLED}: batch results download incomplete; counted when downloaded whole`,
        };
        return;
      }
      try {
        let batchId = call.kind === 'results' ? call.batchId : null;
        if (call.kind === 'file_content') {
          // An output file of a batch keyrelay never saw is recorded under the file's id.
          batchId =
            (await store.batchByOutputFile(ex.key!.account_id, provider, call.fileId))?.batch_id ??
            `file:${call.fileId}`;
        }
        const won = await store.claimBatchResults({
          provider,
          batch_id: batchId!,
          key_id: ex.key!.id,
          account_id: ex.key!.account_id,
          at: ex.createdAt,
          request_id: ex.id,
          cost_usd: t.cost_usd,
          succeeded: t.succeeded,
          unpriced: t.unpriced,
          broken: t.broken,
        });
        if (!won) {
          ex.priced = {
            cost_usd: 0,
            price_source: `${NOT_BILLED}: results of batch ${batchId} already counted by an earlier download`,
          };
          return;
        }
        const notes = [
          t.unpriced > 0 ? `${t.unpriced} succeeded lines unpriced` : '',
          t.broken > 0 ? `${t.broken} lines unreadable` : '',
        ].filter(Boolean);
        const source = t.price_source ?? 'no priced lines';
        ex.priced =
          t.succeeded > 0 && t.unpriced === t.succeeded
            ? {
                cost_usd: null,
                price_source: `unpriced: no succeeded line of batch ${batchId} could be priced`,
              }
            : {
                cost_usd: t.cost_usd,
                // A partial total says so first, as every partial row does (docs/pricing.md).
                price_source: [
                  source.startsWith(`${PARTIAL}: `)
                    ? `${PARTIAL}: batch ${batchId}: ${source.slice(PARTIAL.length + 2)}`
                    : `batch ${batchId}: ${source}`,
                  ...notes,
                ].join('; '),
              };
        ex.usage = {
          input_tokens: t.input_tokens,
          cache_read_tokens: t.cache_read_tokens,
          cache_write_tokens: null,
          output_tokens: t.output_tokens,
          reasoning_tokens: null,
          source: 'provider',
          model: t.model,
        };
      } catch (err) {
        ctx.log.warn({ err, reqId: ex.id }, 'batch results could not be recorded');
        ex.priced = { cost_usd: null, price_source: 'unpriced: the batch ledger could not be written' };
      }
    },
  };
}

/** A batch creation whose requests are in an input file upstream (OpenAI), under a key with a model list. */
export function needsBatchInput(key: KeyRecord, info: RequestInfo): boolean {
  return key.allowed_models != null && info.batch !== undefined && 'inputFile' in info.batch;
}

/** Not passed on when keyrelay reads a file for itself: it reads the file's bytes as they are. */
const NOT_FOR_FILE_READ = new Set(['content-type', 'content-encoding', 'accept', 'accept-encoding']);

/**
 * The models a batch's input file names, read back from upstream with the caller's own credential as it
 * streams (each line parsed alone and dropped), up to OpenAI's 200 MB limit for one: a key with a model list
 * may only create a batch whose every request runs an allowed model. Anything that keeps keyrelay from
 * reading the whole file is a refusal, never a pass. Sets `info.batch` to what the file runs.
 */
export async function readBatchInput(
  s: ProxyServices,
  req: IncomingMessage,
  info: RequestInfo,
): Promise<ProxyError | null> {
  const provider = info.provider;
  const fileId = info.batch && 'inputFile' in info.batch ? info.batch.inputFile : null;
  const support = providerModule(provider).batches!;
  const refuse = (why: string) =>
    new ProxyError(
      'proxy_key_forbidden',
      `This key has a model list, and keyrelay could not check the models of this batch: ${why}.`,
    );
  if (fileId === null || !support.fileContentPath) return refuse('the request names no input file');
  const forwarded = forwardRequestHeaders(req.rawHeaders, req.headers.connection);
  const headers: string[] = [];
  for (let i = 0; i < forwarded.length; i += 2)
    if (!NOT_FOR_FILE_READ.has(forwarded[i]!.toLowerCase())) headers.push(forwarded[i]!, forwarded[i + 1]!);
  const reader = new BatchInputReader(support);
  try {
    const res = await s.dispatcher.request({
      origin: upstreamOrigin(s.config, provider),
      path: support.fileContentPath(fileId),
      method: 'GET',
      headers,
      headersTimeout: s.config.headersTimeoutMs,
      bodyTimeout: s.config.idleTimeoutMs,
    });
    if (res.statusCode !== 200) {
      await res.body.dump();
      return refuse(`reading its input file ${fileId} upstream was answered ${res.statusCode}`);
    }
    let bytes = 0;
    for await (const piece of res.body as AsyncIterable<Buffer>) {
      bytes += piece.length;
      if (bytes > MAX_BATCH_INPUT_BYTES) {
        res.body.destroy();
        return refuse(`its input file is larger than ${MAX_BATCH_INPUT_BYTES} bytes, OpenAI's limit for one`);
      }
      reader.push(piece);
    }
  } catch (err) {
    s.log.warn({ err }, 'batch input file could not be read');
    return refuse(`its input file ${fileId} could not be read upstream`);
  }
  info.batch = reader.end();
  return null;
}
