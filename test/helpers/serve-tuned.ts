/**
 * `keyrelay serve` with internal values no variable sets (argv[2]: JSON, merged over the loaded
 * configuration one level deep), for tests that cannot wait for the shipped constants: a short key cache or
 * limit hold, a login throttle the suite's many sign-ups from 127.0.0.1 do not reach. With argv[3] =
 * `built`, the built code (dist/) serves.
 */
import type { loadConfig as LoadConfig } from '../../src/config.js';
import type { serve as Serve } from '../../src/cli/serve.js';
import { tuned, type Tuning } from './tuning.js';

const dir = process.argv[3] === 'built' ? '../../dist/src' : '../../src';
const { loadConfig } = (await import(`${dir}/config.js`)) as { loadConfig: typeof LoadConfig };
const { serve } = (await import(`${dir}/cli/serve.js`)) as { serve: typeof Serve };
await serve(tuned(loadConfig(), JSON.parse(process.argv[2] ?? '{}') as Tuning));
