import { readdirSync, readFileSync } from 'node:fs';

/** Each thread of this process and its nice value (/proc's stat, field 19, after the parenthesised name). */
export function threadNices(): Map<string, number> {
  const nices = new Map<string, number>();
  for (const tid of readdirSync('/proc/self/task')) {
    try {
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'latin1');
      nices.set(tid, Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]));
    } catch {
      // the thread ended meanwhile
    }
  }
  return nices;
}
