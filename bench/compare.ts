/**
 * Compares two bench JSON files: `tsx bench/compare.ts <before.json> <after.json>`. Prints every result
 * field present in both, with the change; budget checks side by side.
 */
import { readFileSync } from 'node:fs';

type Results = Record<string, Record<string, Record<string, number | null>>>;
interface Report {
  meta: { started: string; commit: string | null; other_processes_cores_median?: number };
  results: Results;
  checks: { name: string; value: number | null; limit: string; pass: boolean | null }[];
}

const args = process.argv.slice(2);
const all = args.includes('--all');
const [a, b] = args.filter((x) => x !== '--all');
/** Without --all, only what the table shows (no driver-side or diagnostic fields). */
const SHOWN = /^(p50|p90|p99|rps|cpu_us_per_req|rps_per_core|eld_p99_ms|ttfb_p50|ttfb_p99|ttlb_p50|rss_\w+)$/;
if (!a || !b) {
  console.error('usage: tsx bench/compare.ts <before.json> <after.json> [--all]');
  process.exit(2);
}
const before = JSON.parse(readFileSync(a, 'utf8')) as Report;
const after = JSON.parse(readFileSync(b, 'utf8')) as Report;

const fmt = (v: number | null | undefined): string =>
  typeof v === 'number' ? String(Math.round(v * 1000) / 1000) : '—';
const rows: string[][] = [['result', 'before', 'after', 'change']];
for (const [scenario, bySubject] of Object.entries(after.results)) {
  for (const [subject, fields] of Object.entries(bySubject)) {
    for (const [field, v] of Object.entries(fields)) {
      if (!all && !SHOWN.test(field)) continue;
      const old = before.results[scenario]?.[subject]?.[field];
      if (typeof old !== 'number' || typeof v !== 'number') continue;
      const pct = old === 0 ? (v === 0 ? '0 %' : '∞') : `${(((v - old) / Math.abs(old)) * 100).toFixed(1)} %`;
      rows.push([`${scenario}.${subject}.${field}`, fmt(old), fmt(v), pct.startsWith('-') ? pct : `+${pct}`]);
    }
  }
}
const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
const line = (r: string[]): string =>
  r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
console.log(`before: ${a} (${before.meta.started}, ${before.meta.commit ?? '?'})`);
console.log(`after:  ${b} (${after.meta.started}, ${after.meta.commit ?? '?'})\n`);
console.log(rows.map(line).join('\n'));
console.log('\nbudget checks:');
const old = new Map(before.checks.map((c) => [c.name, c]));
const mark = (p: boolean | null | undefined): string => (p === true ? 'PASS' : p === false ? 'FAIL' : 'n/a');
for (const c of after.checks) {
  const o = old.get(c.name);
  console.log(
    `  ${c.name.padEnd(42)} ${fmt(o?.value).padStart(9)} ${mark(o?.pass).padEnd(4)} → ${fmt(c.value).padStart(9)} ${mark(c.pass).padEnd(4)}  (${c.limit})`,
  );
}
const noise = [before, after].map((r) => r.meta.other_processes_cores_median ?? 0);
if (Math.max(...noise) > 0.25)
  console.log(
    `\nwarning: other processes were busy (${noise.map((x) => x.toFixed(2)).join(' / ')} cores): compare with care`,
  );
