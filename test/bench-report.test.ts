/**
 * The bench's verdicts on keyrelay's performance targets: judged on the measured ratio, not on the ratio as printed.
 * A log on / off of 0.899 was printed as 0.90 and passed ">= 0.9".
 */
import { describe, expect, it } from 'vitest';
import { evaluate, otelNote, renderTargetTable, type Results } from '../bench/report.js';
import { parseOptions } from '../bench/options.js';

function results(keyrelayRps: number, nologRps: number, bareRps: number): Results {
  return {
    saturation: {
      bare: { rps: bareRps, cpu_us_per_req: 100 },
      keyrelay: { rps: keyrelayRps, cpu_us_per_req: 149.96 },
      keyrelay_nolog: { rps: nologRps },
      keyrelay_nobody: { rps: keyrelayRps },
    },
    memory: { keyrelay: { rss_idle_mb: 90, rss_after_mb: 140.04 } },
  };
}

const line = (table: string, label: string) => table.split('\n').find((l) => l.startsWith(label)) ?? '';

describe('bench verdicts', () => {
  it('fails a ratio just under its bound, though it prints as the bound', () => {
    const r = results(2903.3, 3229.2, 4147.6); // log on / off 0.8991, throughput vs bare 0.69999
    const table = renderTargetTable(r, true);
    expect(line(table, 'throughput log on / off')).toMatch(/0\.899 .*FAIL$/);
    expect(line(table, 'max throughput')).toMatch(/0\.700 .*FAIL$/);
    expect(line(table, 'CPU per request')).toMatch(/1\.500 .*PASS$/); // 1.4996
    const checks = evaluate(r);
    expect(checks.find((c) => c.name === 'throughput logging on / off')?.pass).toBe(false);
    expect(checks.find((c) => c.name === 'RSS after load − idle')?.pass).toBe(false); // +50.04 MB
  });

  it('passes a ratio at or over its bound', () => {
    const table = renderTargetTable(results(2910, 3230, 4000), true);
    expect(line(table, 'throughput log on / off')).toMatch(/0\.901 .*PASS$/);
    expect(line(table, 'max throughput')).toMatch(/0\.728 .*PASS$/);
  });

  it('says what each part of the log costs a request, by thread', () => {
    const at = (cpu: number, main: number, writer: number, others: number) => ({
      rps: 1000,
      cpu_us_per_req: cpu,
      main_thread_us_per_req: main,
      busiest_other_thread_us_per_req: writer,
      other_threads_us_per_req: others,
    });
    const r: Results = {
      saturation: {
        bare: { rps: 1200, cpu_us_per_req: 160 },
        keyrelay: at(214, 174, 22, 40),
        keyrelay_nolog: at(174, 157, 4, 17),
        keyrelay_nobody: at(199, 167, 12, 32),
      },
    };
    const table = renderTargetTable(r, true);
    expect(line(table, 'CPU/req request log on − off (µs)')).toMatch(/\+µs\s+40\.00\s+\(measured\)/);
    expect(line(table, 'CPU/req body logging on − off (µs)')).toMatch(/15\.00/);
    // No "no FTS" column in this run: no row for it.
    expect(line(table, 'CPU/req full-text index')).toBe('');
    expect(line(table, 'CPU/req key limits')).toBe('');
    expect(line(table, 'What each part of the log costs')).toContain(
      'request log +40 (main +17, log writer +18, other threads +5); body logging +15 (main +7, log writer +10, other threads -2)',
    );
  });

  it('says what a key with limits adds to a request, as that column minus keyrelay', () => {
    const table = renderTargetTable(
      {
        saturation: {
          bare: { rps: 1200, cpu_us_per_req: 160 },
          keyrelay: { rps: 1000, cpu_us_per_req: 214 },
          keyrelay_limits: { rps: 990, cpu_us_per_req: 221 },
        },
      },
      true,
    );
    expect(line(table, 'CPU/req key limits (hard budget + TPM) (µs)')).toMatch(
      /221\.00\s+\+µs\s+7\.00\s+\(measured\)/,
    );
  });

  it("puts each proxy's CPU per stream under its first-byte verdict, when the stream step measured it", () => {
    const stream = (bare: number, keyrelay: number) => ({
      bare: { ttfb_p99: 8, cpu_us_per_stream: bare },
      keyrelay: { ttfb_p99: 9, cpu_us_per_stream: keyrelay },
    });
    const table = renderTargetTable(
      {
        stream_openai_c64: stream(700, 910),
        stream_anthropic_c64: { bare: { ttfb_p99: 8 }, keyrelay: { ttfb_p99: 9 } },
      },
      true,
    );
    const lines = table.split('\n');
    const openai = lines.findIndex((l) => l.startsWith('64 streams openai first byte p99'));
    expect(lines[openai + 1]).toMatch(
      /^ {2}CPU per stream \(µs\)\s+700\.00\s+910\.00\s+×\s+1\.300\s+\(measured\)/,
    );
    // Anthropic's step has no CPU reading here: no row rather than one of dashes.
    const anthropic = lines.findIndex((l) => l.startsWith('64 streams anthropic first byte p99'));
    expect(lines[anthropic + 1] ?? '').not.toContain('CPU per stream');
  });

  it('shows keyrelay with its request log off beside each timing target, and which of them it passes', () => {
    const table = renderTargetTable(
      {
        saturation: {
          bare: { rps: 10_000, cpu_us_per_req: 90 },
          keyrelay: { rps: 6_900, cpu_us_per_req: 134 },
          keyrelay_nolog: { rps: 9_800, cpu_us_per_req: 93 },
        },
        open_2000: {
          bare: { p50: 1.1, p99: 3 },
          keyrelay: { p50: 1.2, p99: 9 },
          keyrelay_nolog: { p50: 1.2, p99: 14 },
        },
        stream_openai_c64: {
          bare: { ttfb_p99: 10 },
          keyrelay: { ttfb_p99: 15 },
          keyrelay_nolog: { ttfb_p99: 9 },
        },
      },
      true,
    );
    const lines = table.split('\n');
    const under = (label: string) => lines[lines.findIndex((l) => l.startsWith(label)) + 1] ?? '';
    expect(under('max throughput')).toMatch(
      /^ {2}the same, request log off\s+10000\.00\s+9800\.00\s+×\s+0\.980\s+\(measured\)/,
    );
    expect(under('CPU per request')).toMatch(/93\.00\s+×\s+1\.033/);
    expect(under('latency p99')).toMatch(/14\.00\s+\+ms\s+11\.00\s+\(measured\)/);
    expect(under('64 streams openai first byte p99')).toMatch(/9\.00\s+×\s+0\.900/);
    // Anthropic's step was not measured for it: no row, and no verdict.
    expect(under('64 streams anthropic first byte p99')).not.toContain('request log off');
    expect(line(table, 'keyrelay with its request log off')).toContain(
      'throughput pass, CPU per request pass, p50 pass, p99 fail, openai first byte pass.',
    );
  });

  it('says what OpenTelemetry export adds to a call, export on − off, when --otel ran its column', () => {
    expect(parseOptions(['--otel']).otel).toBe(true);
    expect(parseOptions([]).otel).toBe(false);
    const r: Results = {
      open_2000: { keyrelay: { p50: 0.9, p99: 2.5 }, keyrelay_otel: { p50: 0.95, p99: 2.7 } },
      saturation: {
        keyrelay: { rps: 3000, cpu_us_per_req: 150 },
        keyrelay_otel: { rps: 2850, cpu_us_per_req: 161 },
      },
    };
    expect(otelNote(r)).toEqual([
      'OpenTelemetry export on − off, 2000 rps: latency p50 +0.050 ms, p99 +0.200 ms',
      'OpenTelemetry export on − off, saturation: CPU/req +11 µs, throughput ×0.950',
    ]);
    expect(otelNote({ saturation: { keyrelay: { rps: 3000 } } })).toEqual([]);
  });
});
