/**
 * The bench's own child processes (fake upstream, bare proxy, driver) run as plain JavaScript: under the
 * tsx loader each would carry an extra loader thread (~20 MB RSS), which would flatter keyrelay's memory
 * against the bare proxy. Transpiled into a temp dir whose node_modules links to ours.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const HERE = fileURLToPath(new URL('.', import.meta.url));

export function compileBench(): { dir: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'keyrelay-bench-js-'));
  symlinkSync(join(HERE, '..', 'node_modules'), join(dir, 'node_modules'), 'dir');
  writeFileSync(join(dir, 'package.json'), '{"type":"module"}\n');
  for (const file of readdirSync(HERE).filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'))) {
    const out = ts.transpileModule(readFileSync(join(HERE, file), 'utf8'), {
      compilerOptions: {
        module: ts.ModuleKind.ESNext,
        target: ts.ScriptTarget.ES2023,
        verbatimModuleSyntax: true,
      },
      fileName: file,
    });
    writeFileSync(join(dir, file.replace(/\.ts$/, '.js')), out.outputText);
  }
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
