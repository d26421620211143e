/**
 * What a crash loses (docs/threat-model.md, "What a crash can lose"): `keyrelay serve` (from source, SQLite,
 * log on) takes a steady rate of non-streaming calls against the fake OpenAI upstream, is SIGKILLed mid-load,
 * and every response the caller received is looked up in the log afterwards. Reported per run: rows lost,
 * and the window they came from (from the earliest lost response's end to the kill).
 *
 *   npx tsx bench/sigkill-window.ts [rate/s] [runs]      (default 1000 requests/s, 5 runs)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { openSqlite } from '../src/store/sqlite/db.js';
import { startFakeOpenAI } from '../test/fakes/index.js';
import { createUserWithKey, startServeProcess } from '../test/helpers/process.js';

const RATE = Number(process.argv[2] ?? 1000);
const RUNS = Number(process.argv[3] ?? 5);
const LOAD_MS = 6000;
const BODY = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] });

async function run(
  upstream: string,
): Promise<{ sent: number; done: number; lost: number; windowMs: number }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'keyrelay-sigkill-'));
  try {
    const env = { KEYRELAY_DATA_DIR: dataDir, KEYRELAY_OPENAI_UPSTREAM: upstream };
    const { key } = await createUserWithKey('crash@example.com', env);
    const kr = await startServeProcess(env);
    const dispatcher = new Agent({ connections: 64 });
    const answered: { id: string; at: number }[] = [];
    let sent = 0;
    let killedAt = 0;
    const call = async () => {
      sent++;
      try {
        const res = await request(`${kr.url}/api/proxy/openai/v1/chat/completions`, {
          method: 'POST',
          dispatcher,
          headers: { 'proxy-api-key': key, authorization: 'Bearer sk-x', 'content-type': 'application/json' },
          body: BODY,
        });
        await res.body.text();
        if (res.statusCode === 200 && killedAt === 0)
          answered.push({ id: String(res.headers['x-keyrelay-request-id']), at: performance.now() });
      } catch {
        // cut by the kill
      }
    };
    // Warm: the log writer's thread is up and has written a row before the measured load starts.
    const db0 = openSqlite(join(dataDir, 'requests.db'));
    for (let rows = 0; rows === 0;) {
      await call();
      await new Promise((r) => setTimeout(r, 200));
      rows = db0.prepare<[], { n: number }>('SELECT count(*) AS n FROM requests').get()!.n;
    }
    db0.close();
    answered.length = 0;
    sent = 0;
    const start = performance.now();
    const inflight = new Set<Promise<void>>();
    // Paced in 10 ms ticks: the rate is an average, as a busy client's would be.
    while (performance.now() - start < LOAD_MS) {
      const due = Math.floor(((performance.now() - start) * RATE) / 1000) - sent;
      for (let i = 0; i < due; i++) {
        const p = call();
        inflight.add(p);
        void p.finally(() => inflight.delete(p));
      }
      await new Promise((r) => setTimeout(r, 10));
    }
    kr.child.kill('SIGKILL');
    killedAt = performance.now();
    await kr.exited;
    await Promise.allSettled([...inflight]);
    await dispatcher.close();
    const db = openSqlite(join(dataDir, 'requests.db'));
    const stored = new Set(
      db
        .prepare<[], { id: string }>('SELECT id FROM requests')
        .all()
        .map((r) => r.id),
    );
    db.close();
    const lost = answered.filter((a) => !stored.has(a.id));
    const earliest = lost.reduce((m, a) => Math.min(m, a.at), killedAt);
    return { sent, done: answered.length, lost: lost.length, windowMs: killedAt - earliest };
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const upstream = await startFakeOpenAI();
console.log(`rate ${RATE}/s, ${LOAD_MS} ms of load`);
for (let i = 0; i < RUNS; i++) {
  const r = await run(upstream.url);
  console.log(
    `run ${i + 1}: ${r.done} answered of ${r.sent} sent; lost ${r.lost} rows ` +
      `(${((100 * r.lost) / Math.max(1, r.done)).toFixed(1)} %), window ${r.windowMs.toFixed(0)} ms`,
  );
}
await upstream.close();
