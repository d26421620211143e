/**
 * compose.yaml brought up as an operator would, with podman-compose: PostgreSQL, Redis, two keyrelay instances
 * and nginx on compose's own bridge network, one command. The official postgres, redis and nginx images it
 * names are swapped, through its image variables, for stand-ins made here from Debian's packages
 * (service-images.sh); keyrelay is the image container.test.ts builds. An override file (as an operator's
 * would) points each instance at its own fake upstreams, reachable from the containers at
 * host.containers.internal, whose usage numbers differ, so every row in PostgreSQL names the instance that
 * wrote it. Then: a sign-up through nginx, calls with the official SDKs, load from several callers while one
 * instance's process is killed (SIGKILL), the other serving throughout, the killed one restarted by compose's
 * restart policy and served again, and rows from both in PostgreSQL.
 */
import { execFile, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, connect, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '../console-harness.js';
import { startFakeAnthropic, startFakeOpenAI, type FakeUpstream } from '../fakes/index.js';
import { IMAGE, ROOT, ULIMITS, buildImage, freePort, podman, sleep } from './podman.js';
import { callBoth } from './sdk-calls.js';

/** Generous bound on the rows a SIGKILL may lose: those answered this long before it (see the threat model). */
const SIGKILL_WINDOW_MS = 2_000;

const run = promisify(execFile);
const project = `krcompose${randomBytes(3).toString('hex')}`;
const dir = mkdtempSync(join(tmpdir(), 'keyrelay-compose-'));
/** What each instance's fake upstreams report as input tokens: a row's input_tokens names its instance. */
const MARKER = { 'keyrelay-1': 111, 'keyrelay-2': 222 } as const;
type Instance = keyof typeof MARKER;
const INSTANCES = Object.keys(MARKER) as Instance[];
const container = (service: string) => `${project}_${service}_1`;

let env: NodeJS.ProcessEnv;
let base: string;
const fakes: FakeUpstream[] = [];
const openaiOf = new Map<Instance, FakeUpstream>();
const relays: Server[] = [];
let composeUp = false;

/**
 * A TCP relay on every interface to a fake that listens on 127.0.0.1 only, so the containers reach it through
 * the host's address on their network. Closing either side closes the other, as a direct connection would.
 */
async function relay(to: FakeUpstream): Promise<number> {
  const server = createServer((inbound) => {
    const outbound = connect(to.port, '127.0.0.1');
    inbound.pipe(outbound).pipe(inbound);
    inbound.on('error', () => outbound.destroy());
    outbound.on('error', () => inbound.destroy());
    inbound.on('close', () => outbound.destroy());
    outbound.on('close', () => inbound.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '0.0.0.0', resolve));
  relays.push(server);
  return (server.address() as { port: number }).port;
}

/** `podman-compose -p <project> -f compose.yaml -f <override> …args`, from the repository root. */
async function compose(args: string[], timeoutMs = 300_000): Promise<string> {
  try {
    const { stdout, stderr } = await run(
      'podman-compose',
      ['-p', project, '-f', join(ROOT, 'compose.yaml'), '-f', join(dir, 'override.yaml'), ...args],
      { cwd: ROOT, env, timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 },
    );
    return `${stdout}\n${stderr}`;
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(
      `podman-compose ${args.join(' ')} failed: ${e.message}\n${(e.stdout ?? '').slice(-4000)}\n${(e.stderr ?? '').slice(-4000)}`,
    );
  }
}

async function serviceImages(): Promise<Record<string, string>> {
  try {
    const { stdout } = await run('bash', [join(ROOT, 'test/deploy/service-images.sh')], {
      timeout: 1_200_000,
      maxBuffer: 64 * 1024 * 1024,
    });
    return Object.fromEntries(
      stdout
        .trim()
        .split('\n')
        .map((line) => line.split('=') as [string, string]),
    );
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(
      `could not make the postgres, redis and nginx images: ${e.message}\n${(e.stderr ?? '').slice(-4000)}`,
    );
  }
}

/** `psql` in the postgres container, as the compose file's user; rows as arrays of fields. */
async function sql(query: string): Promise<string[][]> {
  const out = await podman([
    'exec',
    container('postgres'),
    'psql',
    '-U',
    'keyrelay',
    '-d',
    'keyrelay',
    '-At',
    '-F',
    '\t',
    '-c',
    query,
  ]);
  return out === '' ? [] : out.split('\n').map((line) => line.split('\t'));
}

/**
 * Waits until an instance's container can open a connection to each of its fake upstreams on this host
 * (KEYRELAY_*_UPSTREAM, through host.containers.internal). On some machines (a gVisor sandbox with podman
 * 4.3) a compose instance's connections to the host were lost for up to ~50 s after compose up, past
 * keyrelay's connect timeout (10 s): its first call failed with proxy_upstream_timeout. A container started
 * alone on a new network connected at once. This waits for the network, not for keyrelay.
 */
async function waitUpstreamsReachable(service: Instance): Promise<void> {
  const probe =
    'const urls = [process.env.KEYRELAY_OPENAI_UPSTREAM, process.env.KEYRELAY_ANTHROPIC_UPSTREAM].map((u) => new URL(u));' +
    "Promise.all(urls.map((u) => new Promise((ok, fail) => { const s = require('node:net').connect(+u.port, u.hostname, () => { s.end(); ok(); });" +
    " s.setTimeout(2000, () => { s.destroy(); fail(new Error('timeout')); }); s.on('error', fail); })))" +
    '.then(() => process.exit(0), (e) => { console.error(e.message); process.exit(1); })';
  const started = Date.now();
  let last = '';
  for (let attempt = 1; Date.now() - started < 120_000; attempt++) {
    try {
      await podman(['exec', container(service), 'node', '-e', probe], 10_000);
      if (attempt > 1)
        console.log(`${service} reached its upstreams after ${attempt} tries, ${Date.now() - started} ms`);
      return;
    } catch (err) {
      last = (err as Error).message;
    }
    await sleep(500);
  }
  throw new Error(`${service} could not reach its fake upstreams on this host: ${last.slice(0, 1000)}`);
}

/** Polls an instance's /readyz from inside its container: ready means its PostgreSQL and Redis are up. */
async function waitInstanceReady(service: Instance): Promise<void> {
  const probe =
    "require('node:http').get({host:'127.0.0.1',port:8080,path:'/readyz',timeout:2000},r=>process.exit(r.statusCode===200?0:1)).on('error',()=>process.exit(1))";
  let last = '';
  for (let i = 0; i < 300; i++) {
    try {
      await podman(['exec', container(service), 'node', '-e', probe], 10_000);
      return;
    } catch (err) {
      last = (err as Error).message;
    }
    await sleep(500);
  }
  // Everything that could say why: each instance's log (a restart shows as a second start), and what the
  // database's sessions are waiting on.
  const logs = await Promise.all(
    INSTANCES.map(
      async (i) =>
        `--- ${i}:\n${(await podman(['logs', container(i)]).catch((e: Error) => e.message)).slice(-4000)}`,
    ),
  );
  const activity = await sql(
    "SELECT pid, state, wait_event_type, wait_event, left(query, 120) FROM pg_stat_activity WHERE datname = 'keyrelay'",
  ).catch((e: Error) => [[e.message]]);
  throw new Error(
    `${service} did not become ready (${last.slice(0, 500)}):\n${logs.join('\n')}\n--- pg_stat_activity:\n` +
      activity.map((r) => r.join(' | ')).join('\n'),
  );
}

beforeAll(async () => {
  if (spawnSync('podman-compose', ['version'], { encoding: 'utf8' }).status !== 0) {
    throw new Error(
      'podman-compose is not installed: compose.yaml cannot be brought up here (apt-get install podman-compose)',
    );
  }
  const [built, images] = await Promise.all([buildImage(), serviceImages()]);
  console.log(`keyrelay image built on ${built.base} in ${built.seconds.toFixed(0)} s`);

  // Each instance gets its own fake OpenAI and Anthropic, told apart by the usage they report.
  const upstreams: Record<string, string> = {};
  for (const instance of INSTANCES) {
    const tokens = MARKER[instance];
    const openai = await startFakeOpenAI({ usage: { prompt_tokens: tokens } });
    const anthropic = await startFakeAnthropic({
      usage: {
        input_tokens: tokens,
        cache_creation_input_tokens: 0,
        cache_creation_1h_input_tokens: 0,
        cache_read_input_tokens: 0,
      },
    });
    fakes.push(openai, anthropic);
    openaiOf.set(instance, openai);
    writeFileSync(
      join(dir, `${instance}.env`),
      `KEYRELAY_OPENAI_UPSTREAM=http://host.containers.internal:${await relay(openai)}\n` +
        `KEYRELAY_ANTHROPIC_UPSTREAM=http://host.containers.internal:${await relay(anthropic)}\n`,
    );
    upstreams[instance] = join(dir, `${instance}.env`);
  }
  // The operator's override: the image built here, and per instance its upstreams. env_file, not
  // environment: podman-compose 1.0 merges an override's environment into the one mapping both instances
  // share through compose.yaml's YAML anchor, so the last instance's would win for both.
  writeFileSync(
    join(dir, 'override.yaml'),
    `services:\n` +
      INSTANCES.map((i) => `  ${i}:\n    image: ${IMAGE}\n    env_file:\n      - ${upstreams[i]}\n`).join(''),
  );
  // podman as this machine allows it (podman.ts), for every podman command podman-compose runs.
  writeFileSync(
    join(dir, 'containers.conf'),
    `[containers]\ndefault_ulimits = ${JSON.stringify(ULIMITS.filter((_, i) => i % 2 === 1))}\n\n` +
      `[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\n`,
  );
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  env = {
    ...process.env,
    CONTAINERS_CONF: join(dir, 'containers.conf'),
    POSTGRES_PASSWORD: randomBytes(12).toString('hex'),
    KEYRELAY_HTTP_PORT: String(port),
    KEYRELAY_PUBLIC_URL: base,
    ...images,
  };
}, 1_800_000);

afterAll(async () => {
  if (composeUp) {
    // `down -v` removes the named volume; `podman rm -v` the instances' anonymous /data volumes.
    await compose(['--podman-rm-args=--volumes', 'down', '-v', '-t', '5'], 180_000).catch((e: Error) =>
      console.error(e.message),
    );
    await podman(['volume', 'rm', '--force', `${project}_pgdata`]).catch(() => undefined);
    await podman(['network', 'rm', '--force', `${project}_default`]).catch(() => undefined);
  }
  for (const r of relays) r.close();
  await Promise.all(fakes.map((f) => f.close()));
  rmSync(dir, { recursive: true, force: true });
});

describe('compose.yaml', () => {
  it('comes up with one command; one instance killed under load, the other serves; rows from both', async () => {
    composeUp = true;
    const started = Date.now();
    await compose(['up', '-d']);
    for (const instance of INSTANCES) await waitInstanceReady(instance);
    console.log(`compose up and both instances ready in ${((Date.now() - started) / 1000).toFixed(0)} s`);
    for (const instance of INSTANCES) await waitUpstreamsReachable(instance);

    // The services are the images asked for, on compose's network (not the host's).
    for (const service of ['postgres', 'redis', 'nginx']) {
      const inspect = JSON.parse(await podman(['inspect', container(service)])) as {
        ImageName: string;
        HostConfig: { NetworkMode: string };
      }[];
      expect(inspect[0]!.ImageName).toBe(env[`${service.toUpperCase()}_IMAGE`]);
      expect(inspect[0]!.HostConfig.NetworkMode).toBe('bridge');
    }
    // compose.yaml's health checks pass on them (podman runs them on demand here: no systemd timers).
    for (const service of ['postgres', 'redis']) await podman(['healthcheck', 'run', container(service)]);

    // Through nginx: the console page, a sign-up, calls with both official SDKs.
    let page: Awaited<ReturnType<typeof request>> | undefined;
    for (let i = 0; i < 100 && page?.statusCode !== 200; i++) {
      if (page) await page.body.text();
      page = await request(`${base}/`).catch(() => undefined);
      if (page?.statusCode !== 200) await sleep(300);
    }
    expect(page?.statusCode).toBe(200);
    expect(await page!.body.text()).toMatch(/<div id="root">/);
    const login = await new Client(base).signup('compose@example.com');
    const key = (login.json as { key: { key: string } }).key.key;
    const oa = new OpenAI({
      apiKey: 'sk-test-canary-openai',
      baseURL: `${base}/api/proxy/openai/v1`,
      maxRetries: 0,
      defaultHeaders: { 'proxy-api-key': key },
    });
    const an = new Anthropic({
      apiKey: 'sk-ant-canary',
      baseURL: `${base}/api/proxy/anthropic`,
      maxRetries: 0,
      defaultHeaders: { 'proxy-api-key': key },
    });
    const answered: string[] = [];
    /** When each call's answer arrived (Date.now()), by request id. */
    const answeredAt = new Map<string, number>();
    for (let i = 0; i < 4; i++) answered.push(...(await callBoth(oa, an, `hi ${i}`)));

    // Load: callers in a loop, streamed and not, until told to stop. Each records its answers and failures.
    let stop = false;
    let killedAt = 0;
    const afterKill: string[] = [];
    let backAt = 0;
    const failures: { caller: number; message: string }[] = [];
    const caller = async (n: number) => {
      for (let i = 0; !stop; i++) {
        const sentAt = Date.now();
        try {
          let id: string;
          if (i % 2 === 0) {
            const r = await oa.chat.completions
              .create({ model: 'gpt-4o', messages: [{ role: 'user', content: `load ${n}.${i}` }] })
              .withResponse();
            expect(r.data.choices[0]?.message.content).toBeTruthy();
            id = r.response.headers.get('x-keyrelay-request-id')!;
          } else {
            // Slow enough that some are in flight on the instance when it dies.
            const r = await oa.chat.completions
              .create(
                { model: 'gpt-4o', stream: true, messages: [{ role: 'user', content: `load ${n}.${i}` }] },
                { headers: { 'x-fake-events': '5', 'x-fake-event-delay-ms': '100' } },
              )
              .withResponse();
            let text = '';
            for await (const chunk of r.data) text += chunk.choices[0]?.delta.content ?? '';
            expect(text).not.toBe('');
            id = r.response.headers.get('x-keyrelay-request-id')!;
          }
          answered.push(id);
          answeredAt.set(id, Date.now());
          if (killedAt !== 0 && sentAt > killedAt) afterKill.push(id);
        } catch (err) {
          failures.push({ caller: n, message: (err as Error).message });
        }
      }
    };
    const callers = Array.from({ length: 6 }, (_, n) => caller(n));
    const waitFor = async (what: string, done: () => boolean) => {
      for (let i = 0; i < 1200 && !done(); i++) await sleep(100);
      if (!done()) throw new Error(`timed out waiting for ${what}`);
    };
    const before = answered.length;
    await waitFor('answers before the kill', () => answered.length >= before + 30);
    // SIGKILL to the instance's process, as the kernel's OOM killer would: a crash, not `podman kill` (which
    // podman counts as stopped by the user, so no restart).
    const pid = Number(await podman(['inspect', '--format', '{{.State.Pid}}', container('keyrelay-1')]));
    expect(pid).toBeGreaterThan(1);
    process.kill(pid, 'SIGKILL');
    killedAt = Date.now();
    // Calls sent after the kill are answered: keyrelay-2 serves them (nginx passes a failed connect on).
    await waitFor('answers after the kill', () => afterKill.length >= 40);
    // The crashed instance comes back (restart: unless-stopped) and nginx sends it calls again.
    await waitInstanceReady('keyrelay-1');
    backAt = Date.now();
    const upstream1 = openaiOf.get('keyrelay-1')!;
    await waitFor('calls to keyrelay-1 after its restart', () =>
      upstream1.requests.some((r) => r.receivedAt > backAt),
    );
    stop = true;
    await Promise.all(callers);
    const restarts = Number(
      await podman(['inspect', '--format', '{{.RestartCount}}', container('keyrelay-1')]),
    );
    const log = await podman(['logs', container('keyrelay-1')]);
    // podman counts restart attempts, and on a loaded machine one kill has shown as two. What must hold: the
    // instance came back, and no keyrelay process in it died of an uncaught error (Node prints its stack).
    if (restarts !== 1) {
      const events = await podman([
        'events',
        '--stream=false',
        '--since',
        new Date(killedAt - 1_000).toISOString(),
        '--filter',
        `container=${container('keyrelay-1')}`,
        '--format',
        '{{.Time}} {{.Status}}',
      ]).catch((e: Error) => e.message);
      console.log(`keyrelay-1 restarted ${restarts} times:\n${events}\n${log.slice(-6000)}`);
    }
    expect(restarts).toBeGreaterThanOrEqual(1);
    expect(log).not.toMatch(/^Uncaught|^\s+at .+:\d+:\d+\)?$/m);

    // Only a call in flight on the killed instance (or sent on nginx's connection to it as it closed) may
    // fail, nginx's 502 or a cut stream: at most one per caller, whose next calls keyrelay-2 answers.
    console.log(`${answered.length} answered, ${failures.length} failed around the kill`);
    const failedCallers = failures.map((f) => f.caller);
    expect(new Set(failedCallers).size, failures.map((f) => f.message).join('\n')).toBe(failedCallers.length);

    // Rows: every answered call has one, but those answered just before the kill: a SIGKILL loses what the
    // killed instance had not yet written (docs/threat-model.md: the flush interval plus a batch's write, up to
    // a few hundred ms under load; 2 s here). Both instances wrote rows, keyrelay-2 after the kill and
    // keyrelay-1 again after its restart.
    const rows = await sql(
      'SELECT id, input_tokens, (extract(epoch FROM created_at) * 1000)::bigint FROM requests',
    );
    const byId = new Map(rows.map(([id, tokens]) => [id!, Number(tokens)]));
    const inWindow = (id: string) => {
      const at = answeredAt.get(id);
      // The client notes an answer a moment after the bytes left the instance: the window reaches past the kill.
      return at !== undefined && Math.abs(at - killedAt) < SIGKILL_WINDOW_MS;
    };
    const lost = answered.filter((id) => !byId.has(id));
    console.log(
      `${lost.length} answered calls without a row, all within ${SIGKILL_WINDOW_MS} ms of the kill`,
    );
    for (const id of lost) expect(inWindow(id), `row for ${id}`).toBe(true);
    const writtenBy = (instance: Instance) =>
      [...byId.values()].filter((tokens) => tokens === MARKER[instance]).length;
    expect(writtenBy('keyrelay-1')).toBeGreaterThan(0);
    expect(writtenBy('keyrelay-2')).toBeGreaterThan(0);
    expect(afterKill.some((id) => byId.get(id) === MARKER['keyrelay-2'])).toBe(true);
    // keyrelay-1 was down from the kill until its restart: its rows that arrived after the kill are the new
    // process's.
    expect(
      rows.some(([, tokens, at]) => Number(tokens) === MARKER['keyrelay-1'] && Number(at) > killedAt),
    ).toBe(true);
    console.log(
      `rows: ${writtenBy('keyrelay-1')} by keyrelay-1, ${writtenBy('keyrelay-2')} by keyrelay-2 (${rows.length} in all)`,
    );
  }, 600_000);
});
