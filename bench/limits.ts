/**
 * The CPU a key's limits add to each request (issue #13): a key with a hard budget and a tokens-per-minute
 * limit against a key without limits, on the code that differs between them: admission (bound estimate,
 * reservation, token window) and settling (release, real tokens, cost). Everything else a request costs is
 * the same for both keys. Rounds alternate between the two keys; the report is the median difference per
 * request in µs of process CPU (user + system), which the issue bounds at 10 µs.
 *
 *   npm run bench:limits [-- --requests 20000 --rounds 15 --unique --long --redis redis://127.0.0.1:6379]
 *
 * --unique makes every request's user message new text; --long makes it ~8 KB (a document in the prompt).
 * Far from its limits a key's bound counts the prompt in bytes (no tokenizer); near them, in tokens
 * (limits/bound.ts, fittedBound).
 *
 * With --redis the hard budget's reservations are shared through Redis, as with several instances: from
 * the instance's lease (limits/leases.ts), with a script per renewal rather than per request; without it
 * they stay in memory, as on one instance.
 */
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { KeyLimiter, type Admission } from '../src/limits/limiter.js';
import { createRedisCounters } from '../src/limits/redis-counters.js';
import { createRedisHolds } from '../src/limits/redis-holds.js';
import type { RequestLogRow } from '../src/types.js';
import type { KeyRecord } from '../src/store/types.js';
import { computeCost, parseRequestInfo } from '../src/usage/index.js';
import { keyRecord } from '../test/helpers/key-record.js';

const { values } = parseArgs({
  options: {
    requests: { type: 'string', default: '20000' },
    rounds: { type: 'string', default: '15' },
    redis: { type: 'string' },
    // Every request's user message is new text (no prompt string seen before): the tokenizer runs each time.
    unique: { type: 'boolean', default: false },
    long: { type: 'boolean', default: false },
  },
});
const REQUESTS = Number(values.requests);
const DOCUMENT = values.long
  ? 'A reverse proxy sits between clients and servers, forwarding requests and returning answers. '.repeat(88)
  : '';
const ROUNDS = Number(values.rounds);

const baseKey = (id: string): KeyRecord => keyRecord({ id, name: id, account_id: 'bench' });
const plain = baseKey('plain');
const limited: KeyRecord = {
  ...baseKey('limited'),
  budget_usd: 1_000_000,
  budget_period: 'month',
  budget_mode: 'hard',
  rate_limit_tpm: 1_000_000_000,
};

// The bench's usual request: a short chat completion with a system prompt and a bounded output.
const bodyOf = (n: number) =>
  Buffer.from(
    JSON.stringify({
      model: 'gpt-4o-mini',
      messages: [
        { role: 'system', content: 'You are a concise assistant. Answer in one or two sentences.' },
        {
          role: 'user',
          content: `${n ? `(${n}) ` : ''}${DOCUMENT}What does a reverse proxy do, and why would I put one in front of an API?`,
        },
      ],
      max_tokens: 256,
      stream: true,
    }),
  );
// Parsed once per request by the proxy whatever the key: not part of the difference.
const infoOf = (n: number) =>
  parseRequestInfo('openai', '/v1/chat/completions', bodyOf(n), 'application/json');
const info = infoOf(0);
let serial = 0;
const usage = {
  input_tokens: 52,
  output_tokens: 180,
  cache_read_tokens: 0,
  cache_write_tokens: 0,
  reasoning_tokens: 0,
  source: 'provider' as const,
  model: 'gpt-4o-mini',
};
const cost = computeCost('openai', 'gpt-4o-mini', usage).cost_usd;

function row(key: KeyRecord): RequestLogRow {
  return {
    key_id: key.id,
    created_at: new Date().toISOString(),
    cost_usd: cost,
    input_tokens: usage.input_tokens,
    output_tokens: usage.output_tokens,
  } as RequestLogRow;
}

async function round(limiter: KeyLimiter, key: KeyRecord): Promise<number> {
  // Built outside the measured part.
  const rows = Array.from({ length: REQUESTS }, () => row(key));
  const infos =
    values.unique || values.long ? Array.from({ length: REQUESTS }, () => infoOf(++serial)) : null;
  const start = process.cpuUsage();
  for (let i = 0; i < REQUESTS; i++) {
    let a: Admission | Promise<Admission> = limiter.admit(key, 'openai', infos?.[i] ?? info, 'POST');
    if (a instanceof Promise) a = await a;
    if (a instanceof Error) throw a;
    limiter.settle(a, rows[i]!);
  }
  const used = process.cpuUsage(start);
  return (used.user + used.system) / REQUESTS;
}

async function main(): Promise<void> {
  const client = values.redis ? new Redis(values.redis, { maxRetriesPerRequest: 1 }) : null;
  const limiter = new KeyLimiter({
    spendSince: () => Promise.resolve(0),
    shared: client ? createRedisCounters(client) : null,
    holds: client ? createRedisHolds(client) : null,
  });
  limited.id = `bench-${process.pid}-${Date.now()}`;
  // Warm-up: the tokenizer tables, the price lookups, the JIT; and the key's spend loaded.
  for (let i = 0; i < 3; i++) {
    await round(limiter, plain);
    await round(limiter, limited);
  }
  const diffs: number[] = [];
  const plainUs: number[] = [];
  const limitedUs: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const p = await round(limiter, plain);
    const l = await round(limiter, limited);
    plainUs.push(p);
    limitedUs.push(l);
    diffs.push(l - p);
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const f = (x: number) => x.toFixed(2);
  console.log(
    `limits bench (${values.redis ? 'hard budget via Redis' : 'one instance, in memory'}` +
      `${values.unique || values.long ? ', every prompt new' : ''}${values.long ? ', ~8 KB each' : ''}): ` +
      `${ROUNDS} rounds × ${REQUESTS} requests per key`,
  );
  console.log(`  no limits:           ${f(median(plainUs))} µs CPU per request (median round)`);
  console.log(`  hard budget + TPM:   ${f(median(limitedUs))} µs CPU per request`);
  console.log(
    `  added by the limits: ${f(median(diffs))} µs (median; min ${f(Math.min(...diffs))}, max ${f(Math.max(...diffs))}) — bound: 10 µs`,
  );
  await limiter.close();
  await client?.quit();
}

await main();
