/** OpenAI: https://platform.openai.com/docs/api-reference */
import { readRateLimits, type ProviderModule } from '../types.js';
import { OPENAI_BATCHES } from './batches.js';
import { IMAGES_USAGE, SPEECH_USAGE, TRANSCRIPTION_USAGE } from './media-usage.js';
import { OPENAI_SOCKET } from './socket.js';
import { CHAT_USAGE, EMBEDDINGS_USAGE, RESPONSES_USAGE } from './usage.js';

const str = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null);

export const openai: ProviderModule<'openai'> = {
  id: 'openai',
  route: 'openai',
  genAiName: 'openai',
  priceProviderId: 'openai',
  freeToolFees: {},
  // An OpenAI-compatible upstream may take the key as `x-api-key` (some gateways do); it wins when both come.
  credentialHeaders: ['x-api-key', 'authorization'],
  // Matched at the path's end, so a base URL with or without /v1 (or a deployment prefix) classifies alike.
  endpoints: [
    { match: /\/chat\/completions$/, class: 'chat', usage: CHAT_USAGE, injectStreamUsage: true },
    { match: /\/completions$/, class: 'completions', usage: CHAT_USAGE },
    { match: /\/responses$/, class: 'responses', usage: RESPONSES_USAGE },
    { match: /\/embeddings$/, class: 'embeddings', usage: EMBEDDINGS_USAGE },
    { match: /\/audio\/transcriptions$/, class: 'audio_transcription', usage: TRANSCRIPTION_USAGE },
    { match: /\/audio\/translations$/, class: 'audio_translation', usage: TRANSCRIPTION_USAGE },
    { match: /\/audio\/speech$/, class: 'audio_speech', usage: SPEECH_USAGE },
    { match: /\/images\/(?:generations|edits|variations)$/, class: 'images', usage: IMAGES_USAGE },
    { match: /\/moderations$/, class: 'moderations', usage: null },
    { match: /\/batches(?:\/[^/]+(?:\/cancel)?)?$/, class: 'batches', usage: null },
    { match: /\/files(?:\/[^/]+(?:\/content)?)?$/, class: 'files', usage: null },
    { match: /\/models(?:\/[^/]+)?$/, class: 'models', usage: null },
    { match: /\/realtime(?:\/|$)/, class: 'realtime', usage: null },
  ],
  endUser: (body) => str(body.user) ?? str(body.safety_identifier),
  // Codex sends its conversation's id as `session_id` on every request (older versions also as
  // `conversation_id`): codex-rs/codex-api/src/requests/headers.rs.
  clientSession: (header) => header('session_id') ?? header('conversation_id'),
  // https://platform.openai.com/docs/guides/rate-limits#rate-limits-in-headers
  rateLimits: (headers) =>
    readRateLimits(headers, ['requests', 'tokens'], (name, part) => `x-ratelimit-${part}-${name}`),
  errorBody: (err) =>
    JSON.stringify({ error: { message: err.message, type: 'keyrelay_error', code: err.code } }),
  socket: OPENAI_SOCKET,
  batches: OPENAI_BATCHES,
};
