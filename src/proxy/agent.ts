/**
 * undici's Agent without undici's index. The index also loads fetch, WebSocket, EventSource, the cache and
 * mock layers, which keyrelay never calls: ~3 MB of heap and ~8 MB of RSS in every instance (measured with
 * `npm run bench`, where idle RSS has a budget). An Agent is assembled here exactly as the index does it:
 * the dispatcher class with the request API mixed in. undici is pinned to 7.x by the lockfile; if a release
 * moved these files, every proxy test would fail at import.
 */
import { createRequire } from 'node:module';
import type { Agent as UndiciAgent } from 'undici';

const require = createRequire(import.meta.url);
const Dispatcher = require('undici/lib/dispatcher/dispatcher.js') as { prototype: object };
Object.assign(Dispatcher.prototype, require('undici/lib/api/index.js'));

export const Agent = require('undici/lib/dispatcher/agent.js') as typeof UndiciAgent;
