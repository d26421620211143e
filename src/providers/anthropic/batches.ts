/** Anthropic Message Batches: https://docs.anthropic.com/en/api/creating-message-batches */
import { isRecord, num } from '../../usage/index.js';
import type { BatchSupport } from '../types.js';
import { MESSAGES_USAGE } from './usage.js';

const COLLECTION = /\/messages\/batches$/;
const ONE = /\/messages\/batches\/([^/]+)(?:\/cancel)?$/;
const RESULTS = /\/messages\/batches\/([^/]+)\/results$/;

export const ANTHROPIC_BATCHES: BatchSupport = {
  callOf(method, path) {
    if (COLLECTION.test(path)) return { kind: 'object', create: method === 'POST' };
    const results = RESULTS.exec(path);
    if (results && method === 'GET') return { kind: 'results', batchId: decodeURIComponent(results[1]!) };
    if (ONE.test(path) && method !== 'DELETE') return { kind: 'object', create: false };
    return null;
  },
  readObject(o) {
    if (o.type !== 'message_batch' || typeof o.id !== 'string') return null;
    const counts: Record<string, number> = {};
    if (isRecord(o.request_counts))
      for (const [k, v] of Object.entries(o.request_counts)) if (num(v) !== null) counts[k] = v as number;
    return {
      id: o.id,
      status: typeof o.processing_status === 'string' ? o.processing_status : null,
      request_counts: counts,
      output_file_id: null,
    };
  },
  // {"custom_id", "result": {"type": "succeeded" | "errored" | "canceled" | "expired", "message"?}}
  readLine(o) {
    if (typeof o.custom_id !== 'string' || !isRecord(o.result)) return null;
    const message = o.result.message;
    if (o.result.type !== 'succeeded' || !isRecord(message))
      return { succeeded: false, model: null, counts: null };
    return {
      succeeded: true,
      model: typeof message.model === 'string' ? message.model : null,
      counts: MESSAGES_USAGE.json(message.usage, message).counts,
    };
  },
  // "all usage is charged at 50% of the standard API prices": https://docs.anthropic.com/en/docs/build-with-claude/batch-processing
  discount: {
    factor: 0.5,
    documented: 'https://docs.anthropic.com/en/docs/build-with-claude/batch-processing',
  },
  resultsUrlField: 'results_url',
  // {"requests": [{"custom_id", "params": {"model", …}}]}
  creation(body) {
    const requests = Array.isArray(body.requests) ? (body.requests as unknown[]) : [];
    return {
      models: requests.map((r) => {
        const params = isRecord(r) ? r.params : null;
        return isRecord(params) && typeof params.model === 'string' && params.model !== ''
          ? params.model
          : null;
      }),
    };
  },
};
