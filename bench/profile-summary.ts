/**
 * Top self-time functions (and files) of V8 .cpuprofile files written by `node --cpu-prof`.
 * CLI: `tsx bench/profile-summary.ts <file-or-dir> [N]`.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}
export interface ProfileEntry {
  name: string;
  selfMs: number;
  share: number;
}
export interface ProfileSummary {
  files: string[];
  totalMs: number;
  functions: ProfileEntry[];
  byFile: ProfileEntry[];
  text: string;
}

const ROOT = fileURLToPath(new URL('..', import.meta.url));

function shortUrl(url: string): string {
  if (!url) return '(native)';
  const path = url.startsWith('file://') ? fileURLToPath(url) : url;
  const nm = path.lastIndexOf('node_modules/');
  if (nm >= 0) return path.slice(nm + 'node_modules/'.length);
  return path.startsWith('/') ? relative(ROOT, path) : path;
}

function top(map: Map<string, number>, total: number, n: number): ProfileEntry[] {
  return [...map.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([name, us]) => ({
      name,
      selfMs: Math.round(us / 100) / 10,
      share: Math.round((us / total) * 1000) / 10,
    }));
}

export function summarizeProfiles(fileOrDir: string, n = 25): ProfileSummary | null {
  let files: string[];
  try {
    files = statSync(fileOrDir).isDirectory()
      ? readdirSync(fileOrDir)
          .filter((f) => f.endsWith('.cpuprofile'))
          .map((f) => join(fileOrDir, f))
      : [fileOrDir];
  } catch {
    return null;
  }
  if (files.length === 0) return null;
  const fns = new Map<string, number>();
  const byFile = new Map<string, number>();
  let total = 0;
  for (const file of files) {
    const p = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
    const nodes = new Map(p.nodes.map((node) => [node.id, node]));
    for (let i = 0; i < p.samples.length; i += 1) {
      const node = nodes.get(p.samples[i]!);
      const us = p.timeDeltas[i] ?? 0;
      if (!node) continue;
      const { functionName, url, lineNumber } = node.callFrame;
      if (functionName === '(idle)') continue;
      total += us;
      const where = shortUrl(url);
      const fn = `${functionName || '(anonymous)'} ${where}${url ? `:${lineNumber + 1}` : ''}`;
      fns.set(fn, (fns.get(fn) ?? 0) + us);
      byFile.set(where, (byFile.get(where) ?? 0) + us);
    }
  }
  const functions = top(fns, total, n);
  const files10 = top(byFile, total, 12);
  const text = [
    `busy ${Math.round(total / 1000)} ms (idle excluded); functions by self time:`,
    ...functions.map(
      (e) => `  ${e.share.toFixed(1).padStart(5)} %  ${e.selfMs.toFixed(0).padStart(6)} ms  ${e.name}`,
    ),
    'files by self time:',
    ...files10.map(
      (e) => `  ${e.share.toFixed(1).padStart(5)} %  ${e.selfMs.toFixed(0).padStart(6)} ms  ${e.name}`,
    ),
  ].join('\n');
  return { files, totalMs: Math.round(total / 1000), functions, byFile: files10, text };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const [target, count] = process.argv.slice(2);
  if (!target) {
    console.error('usage: tsx bench/profile-summary.ts <file.cpuprofile | dir> [N]');
    process.exit(2);
  }
  const s = summarizeProfiles(target, Number(count) || 30);
  console.log(s ? s.text : `no .cpuprofile in ${target}`);
}
