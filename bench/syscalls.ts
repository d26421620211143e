/**
 * System calls keyrelay makes per request, counted by strace (exact, unlike CPU time on a shared machine):
 * `n` requests one after another of each kind (a JSON answer; streams of 20 events 2 ms apart: OpenAI's asking for usage
 * as the bench's do, one keyrelay strips the usage it asked for from, Anthropic's), then the socket writes
 * (write, writev, sendmsg) and all calls per request. Needs strace.
 *
 *   npm run build && npx tsx bench/syscalls.ts [--n 500] [--main DIR] [--all]
 * (--main: another build, e.g. a worktree; --all: every call's count per request)
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Pool } from 'undici';
import { compileBench } from './compile.js';
import { startProbe } from './keyrelay.js';
import { useScriptDir } from './processes.js';
import { BODIES } from './protocol.js';

const argv = process.argv.slice(2);
const opt = (name: string): string | undefined => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};
const n = Number(opt('--n') ?? 500);
const mainDir = opt('--main');
const tmp = mkdtempSync(join(tmpdir(), 'keyrelay-syscalls-'));
const compiled = compileBench();
useScriptDir(compiled.dir);
const { upstream, kr, key } = await startProbe(tmp, { requestLog: true, build: mainDir });
const pool = new Pool(`http://127.0.0.1:${kr.port}`, { connections: 1 });
const STRIPPED = '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello."}],"stream":true}';
const kinds = {
  'JSON answer': { provider: 'openai', stream: false, body: BODIES.openai.plain },
  'OpenAI stream': { provider: 'openai', stream: true, body: BODIES.openai.stream },
  'OpenAI stream, usage stripped': { provider: 'openai', stream: true, body: STRIPPED },
  'Anthropic stream': { provider: 'anthropic', stream: true, body: BODIES.anthropic.stream },
} as const;
const headers = {
  openai: { authorization: 'Bearer sk-bench' },
  anthropic: { 'x-api-key': 'sk-ant-bench', 'anthropic-version': '2023-06-01' },
};
const path = { openai: '/v1/chat/completions', anthropic: '/v1/messages' };

async function send(kind: keyof typeof kinds, count: number): Promise<void> {
  const { provider, stream, body } = kinds[kind];
  for (let i = 0; i < count; i++) {
    const res = await pool.request({
      method: 'POST',
      path: `/api/proxy/${provider}${path[provider]}${stream ? '?chunks=20&chunk_ms=2' : ''}`,
      headers: { ...headers[provider], 'proxy-api-key': key, 'content-type': 'application/json' },
      body,
    });
    await res.body.dump({ limit: Number.POSITIVE_INFINITY });
  }
}

console.log(`keyrelay ${mainDir ?? '(this build)'}: system calls per request, ${n} requests of each kind`);
for (const kind of Object.keys(kinds) as (keyof typeof kinds)[]) {
  await send(kind, 50); // warm
  const out = join(tmp, 'strace.txt');
  const tracer = spawn('strace', ['-f', '-c', '-o', out, '-p', String(kr.pid)], { stdio: 'ignore' });
  await new Promise((r) => setTimeout(r, 500)); // attached
  await send(kind, n);
  tracer.kill('SIGINT');
  await new Promise((r) => tracer.once('exit', r));
  const counts = new Map<string, number>();
  for (const line of readFileSync(out, 'utf8').split('\n')) {
    const m = /^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$/.exec(line);
    if (m && m[2] !== 'total') counts.set(m[2]!, Number(m[1]));
  }
  const writes = ['write', 'writev', 'sendmsg'].reduce((t, c) => t + (counts.get(c) ?? 0), 0);
  const all = [...counts.values()].reduce((t, c) => t + c, 0);
  console.log(
    `${kind.padEnd(32)} socket writes ${(writes / n).toFixed(2)}  all calls ${(all / n).toFixed(1)}  ` +
      `(write ${counts.get('write') ?? 0}, writev ${counts.get('writev') ?? 0})`,
  );
  if (argv.includes('--all'))
    console.log(
      [...counts]
        .sort((a, b) => b[1] - a[1])
        .map(([c, k]) => `${c} ${(k / n).toFixed(2)}`)
        .join(', '),
    );
}
await pool.close();
await Promise.all([kr.stop(), upstream.stop()]);
compiled.remove();
rmSync(tmp, { recursive: true, force: true });
