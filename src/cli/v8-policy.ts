/**
 * What `keyrelay serve` asks of V8 for itself. Process-wide, so only the CLI's serve applies it; an embedder
 * (the tests) keeps V8's defaults.
 */
import { setFlagsFromString } from 'node:v8';

export interface V8Policy {
  /** KEYRELAY_V8_PRETENURING: keep V8's allocation-site pretenuring (default false: off). */
  pretenuring: boolean;
}

/**
 * Allocation-site pretenuring off. V8 allocates an object straight into the old generation when most
 * objects from the same place in the code outlived their first scavenge. A proxy's objects live as long
 * as their request, yet with 64 requests in flight many are alive at every scavenge, so V8 pretenures
 * request-scoped allocations. They then die in the old generation, which only a mark-compact frees. Until
 * then, every young object they point to outlives its scavenges too. Measured, keyrelay pinned to one
 * core at 64 connections: 7.4 → 3.3 KB promoted a request, scavenges 21 → 13 µs a request, mark-compacts
 * 3 → 1 in 4 s (`bench/gc-probe.ts`), CPU per request 185 → 168 µs (`npm run bench:flags`, 7 interleaved
 * repetitions; docs/performance.md, "Eleventh pass").
 *
 * V8 reads the flag at each scavenge, so setting it now works as the command-line flag does (166 µs in
 * the same A/B). The few allocation sites pretenured while the modules loaded stay so.
 */
export function applyV8Policy(policy: V8Policy): void {
  setFlagsFromString(
    policy.pretenuring ? '--allocation-site-pretenuring' : '--no-allocation-site-pretenuring',
  );
}
