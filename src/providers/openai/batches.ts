/** OpenAI Batch API: https://platform.openai.com/docs/api-reference/batch */
import { isRecord, num } from '../../usage/index.js';
import type { BatchSupport } from '../types.js';
import { CHAT_USAGE, RESPONSES_USAGE } from './usage.js';

const COLLECTION = /\/batches$/;
const ONE = /\/batches\/([^/]+)(?:\/cancel)?$/;
const CONTENT = /\/files\/([^/]+)\/content$/;

export const OPENAI_BATCHES: BatchSupport = {
  callOf(method, path) {
    if (COLLECTION.test(path)) return { kind: 'object', create: method === 'POST' };
    if (ONE.test(path)) return { kind: 'object', create: false };
    const file = CONTENT.exec(path);
    if (file && method === 'GET') return { kind: 'file_content', fileId: decodeURIComponent(file[1]!) };
    return null;
  },
  readObject(o) {
    if (o.object !== 'batch' || typeof o.id !== 'string') return null;
    const counts: Record<string, number> = {};
    if (isRecord(o.request_counts))
      for (const [k, v] of Object.entries(o.request_counts)) if (num(v) !== null) counts[k] = v as number;
    return {
      id: o.id,
      status: typeof o.status === 'string' ? o.status : null,
      request_counts: counts,
      output_file_id: typeof o.output_file_id === 'string' ? o.output_file_id : null,
    };
  },
  // {"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error"}
  readLine(o) {
    if (typeof o.custom_id !== 'string') return null;
    const response = o.response;
    if (!isRecord(response) || response.status_code !== 200 || !isRecord(response.body))
      return { succeeded: false, model: null, counts: null };
    const body = response.body;
    return {
      succeeded: true,
      model: typeof body.model === 'string' ? body.model : null,
      // A batch line's body is a chat completion or a Responses object, as its endpoint answers.
      counts: (Array.isArray(body.output) ? RESPONSES_USAGE : CHAT_USAGE).json(body.usage, body).counts,
    };
  },
  // "The Batch API … at a 50% discount": https://platform.openai.com/docs/guides/batch
  discount: { factor: 0.5, documented: 'https://platform.openai.com/docs/guides/batch' },
  // {"input_file_id", "endpoint", "completion_window", "metadata"?}: the requests are in the file.
  creation: (body) => ({ inputFile: typeof body.input_file_id === 'string' ? body.input_file_id : null }),
  // {"custom_id", "method", "url", "body": {"model", …}}
  inputLineModel(line) {
    const body = line.body;
    return isRecord(body) && typeof body.model === 'string' && body.model !== '' ? body.model : null;
  },
  // https://platform.openai.com/docs/api-reference/files/create: `file` and `purpose` ("batch" for batches).
  uploads: { path: /^\/v1\/files$/, isInput: (fields) => fields.purpose === 'batch' },
  fileContentPath: (fileId) => `/v1/files/${encodeURIComponent(fileId)}/content`,
};
