/** Input validation with zod; every failure becomes a 400 invalid_request naming the offending field. */
import { z } from 'zod';
import { consoleError } from './errors.js';

export function parseInput<T extends z.ZodType>(schema: T, input: unknown): z.output<T> {
  const r = schema.safeParse(input ?? {});
  if (r.success) return r.data;
  const issue = r.error.issues[0];
  // A message the schema wrote for people is a sentence (it ends with a full stop) and says which field;
  // zod's own are prefixed with the field's name.
  const where =
    issue && issue.path.length > 0 && !issue.message.endsWith('.') ? `${issue.path.join('.')}: ` : '';
  throw consoleError('invalid_request', `${where}${issue?.message ?? 'invalid input'}`);
}

/** ISO-8601 (or anything Date.parse reads) normalised to ISO UTC. */
export const isoTime = z
  .string()
  .max(64)
  .refine((s) => !Number.isNaN(Date.parse(s)), 'must be an ISO-8601 time')
  .transform((s) => new Date(s).toISOString());

/** Query-string integer (querystrings are strings; z.coerce would accept '' as 0). */
export function queryInt(min: number, max: number) {
  return z
    .string()
    .regex(/^\d{1,9}$/, 'must be an integer')
    .transform(Number)
    .refine((n) => n >= min && n <= max, `must be ${min}–${max}`);
}

export const idParam = z.object({ id: z.string().min(1).max(100) });
