/**
 * Which Node keyrelay runs on (src/node-support.ts): package.json says the same, the built CLI refuses any
 * other in one line, and on Node 22+ better-sqlite3 (which aborts on 24.19+) is never loaded at all.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { SUPPORTED_NODE, sqliteDriverFor, unsupportedNodeMessage } from '../src/node-support.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

describe('supported Node versions', () => {
  it('picks better-sqlite3 on 20.19+, node:sqlite from 22.13 / 23.4, and nothing elsewhere', () => {
    const table: [string, string | null][] = [
      ['18.20.4', null],
      ['20.18.3', null],
      ['20.19.0', 'better-sqlite3'],
      ['v20.20.2', 'better-sqlite3'],
      ['21.7.3', null],
      ['22.12.0', null],
      ['22.13.0', 'node:sqlite'],
      ['22.23.3', 'node:sqlite'],
      ['23.3.0', null],
      ['23.4.0', 'node:sqlite'],
      ['24.0.0', 'node:sqlite'],
      ['24.21.0', 'node:sqlite'],
      ['26.1.0', 'node:sqlite'],
    ];
    for (const [v, driver] of table) expect([v, sqliteDriverFor(v)]).toEqual([v, driver]);
    expect(unsupportedNodeMessage('24.21.0')).toBeNull();
    expect(unsupportedNodeMessage('21.7.3')).toMatch(/^keyrelay: Node 21\.7\.3 is not supported; use Node/);
  });

  it("matches package.json's engines", () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { engines: { node: string } };
    expect(pkg.engines.node).toBe(SUPPORTED_NODE);
  });

  it('the built CLI refuses an unsupported Node in one line, exit 1, before loading anything else', () => {
    const dir = mkdtempSync(join(tmpdir(), 'keyrelay-node-'));
    try {
      // Node 21 as far as keyrelay can tell: process.versions is replaced before bin/keyrelay.js runs.
      const fake = join(dir, 'node21.mjs');
      writeFileSync(
        fake,
        "Object.defineProperty(process, 'versions', { value: { ...process.versions, node: '21.7.3' } });\n",
      );
      const r = spawnSync(process.execPath, ['--import', fake, join(ROOT, 'bin/keyrelay.js'), 'serve'], {
        encoding: 'utf8',
        env: { ...process.env, KEYRELAY_DATA_DIR: dir, KEYRELAY_PORT: '0' },
        timeout: 30_000,
      });
      expect(r.status).toBe(1);
      expect(r.stdout).toBe('');
      expect(r.stderr).toBe(`${unsupportedNodeMessage('21.7.3')}\n`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("loads only this Node's driver, and silences only node:sqlite's ExperimentalWarning", () => {
    const dir = mkdtempSync(join(tmpdir(), 'keyrelay-node-'));
    try {
      const script = `
        import { createRequire } from 'node:module';
        import { openStores } from './src/store/factory.ts';
        const stores = await openStores({ dataDir: ${JSON.stringify(dir)}, databaseUrl: null });
        await stores.logStore.count();
        await stores.configStore.close();
        await stores.logStore.close();
        process.emitWarning('another experiment', 'ExperimentalWarning');
        const loaded = Object.keys(createRequire(import.meta.url).cache).some((p) => p.includes('better-sqlite3'));
        console.log(JSON.stringify({ driver: stores.driver, betterSqlite3Loaded: loaded }));
      `;
      const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
        cwd: ROOT,
        encoding: 'utf8',
        timeout: 30_000,
      });
      expect(r.status, r.stderr).toBe(0);
      const driver = sqliteDriverFor(process.versions.node);
      expect(JSON.parse(r.stdout)).toEqual({ driver, betterSqlite3Loaded: driver === 'better-sqlite3' });
      expect(r.stderr).toContain('another experiment');
      expect(r.stderr).not.toContain('SQLite is an experimental feature');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('every installed dependency accepts Node 20.19, or the README says why its EBADENGINE warning is harmless', () => {
    const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { dev?: boolean; engines?: { node?: string } | string[] }>;
    };
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const excluding: string[] = [];
    for (const [path, entry] of Object.entries(lock.packages)) {
      const range = Array.isArray(entry.engines) ? undefined : entry.engines?.node;
      if (!path || entry.dev || range === undefined || admitsNode20(range)) continue;
      excluding.push(path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length));
    }
    for (const name of excluding)
      expect([name, readme.includes(`EBADENGINE … package: '${name}@`)]).toEqual([name, true]);
  });
});

/**
 * Whether an engines range admits Node 20.19.0, for the forms dependencies use (`>=a.b`, `20`, `20.x`, `^20.b`, `*`); an unknown form counts as excluding, so the test names it.
 */
function admitsNode20(range: string): boolean {
  return range.split('||').some((alt) => {
    const set = alt.trim().replace(/>=\s+/g, '>=').split(/\s+/);
    return set.every((c) => {
      if (c === '*') return true;
      const m = /^(>=|\^|)v?(\d+)(?:\.(\d+|x))?(?:\.(\d+|x))?$/.exec(c);
      if (!m) return false;
      const major = Number(m[2]);
      const minor = m[3] === undefined || m[3] === 'x' ? 0 : Number(m[3]);
      if (m[1] === '>=') return major < 20 || (major === 20 && minor <= 19);
      return major === 20 && minor <= 19;
    });
  });
}
