/**
 * What a request says, with its provider: the body as the usage layer parses it, and for a batch the models
 * its requests run (the provider's batch support reads them).
 */
import { providerModule, type Provider } from '../providers/index.js';
import type { BatchSupport } from '../providers/types.js';
import {
  isRecord,
  isUpload,
  parseRequest,
  readMultipartFields,
  str,
  type BatchWork,
  type ParsedRequest,
} from '../usage/index.js';
import { BatchInputReader } from './batch-input.js';

/** What the proxy learned from a request: its provider and upstream path, and what its body says. */
export interface RequestInfo extends ParsedRequest {
  provider: Provider;
  path: string; // upstream path without query, e.g. /v1/chat/completions
}

/** What a request body says: at once, but for an upload (multipart), whose parts are read as a stream. */
export function readRequestInfo(
  provider: Provider,
  path: string,
  body: Buffer,
  contentType: string | undefined,
): RequestInfo | Promise<RequestInfo> {
  if (isUpload(contentType, body)) return uploadInfo(provider, path, body, contentType!);
  return parseRequestInfo(provider, path, body, contentType);
}

/** What a body that is not an upload says (readRequestInfo reads uploads). */
export function parseRequestInfo(
  provider: Provider,
  path: string,
  body: Buffer,
  contentType: string | undefined,
): RequestInfo {
  const parsed = parseRequest(body, contentType, providerModule(provider).endUser);
  const batches = providerModule(provider).batches;
  const creates = batches?.callOf('POST', path);
  if (!batches || creates?.kind !== 'object' || !creates.create) return { provider, path, ...parsed };
  // A batch runs the models its requests name: a `model` beside them is a decoy.
  const batch = batchCreation(batches, isRecord(parsed.json) ? parsed.json : null);
  return { provider, path, ...parsed, model: null, batch };
}

function batchCreation(
  batches: BatchSupport,
  body: Record<string, unknown> | null,
): NonNullable<RequestInfo['batch']> {
  if (!body) return { models: [], unreadable: 0 };
  const work = batches.creation(body);
  if ('inputFile' in work) return work;
  const models = work.models.filter((m): m is string => m !== null);
  return { models: [...new Set(models)], unreadable: work.models.length - models.length };
}

/**
 * An upload (audio, image, file): its text fields stand in for a JSON body (`stream` is the text "true").
 * A file upload names no model; a batch's input file names those of its lines, read in a second pass once
 * the fields (which may follow the file) say it is one.
 */
async function uploadInfo(
  provider: Provider,
  path: string,
  body: Buffer,
  contentType: string,
): Promise<RequestInfo> {
  let parsed = await readMultipartFields(body, contentType);
  const batches = providerModule(provider).batches;
  const uploads = batches?.uploads?.path.test(path) ? batches.uploads : undefined;
  let batch: BatchWork | undefined;
  if (parsed.ok && batches && uploads?.isInput(parsed.fields)) {
    const reader = new BatchInputReader(batches);
    let files = 0;
    parsed = await readMultipartFields(body, contentType, (_name, content) => {
      files++;
      content.on('data', (piece: Buffer) => reader.push(piece));
    });
    batch = reader.end();
    // Two files in one batch upload: which one upstream keeps is its choice, not keyrelay's to guess.
    if (files !== 1) batch = { models: [], unreadable: Math.max(1, batch.unreadable) };
  }
  if (!parsed.ok)
    return {
      provider,
      path,
      model: null,
      stream: false,
      end_user: null,
      json: null,
      bodyError: parsed.error,
    };
  const f = parsed.fields;
  return {
    provider,
    path,
    model: uploads ? null : str(f.model),
    stream: f.stream === 'true',
    end_user: providerModule(provider).endUser(f),
    json: null,
    ...(batch && { batch }),
  };
}
