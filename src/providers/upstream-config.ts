/**
 * KEYRELAY_UPSTREAMS read and checked: named upstreams, each a provider at /api/proxy/<name>/… with a
 * built-in's shape (upstreams.ts builds its module). Apart from the modules, so that config.ts can check the
 * variable at start without loading the usage readers and the price library.
 */
import { z } from 'zod';
import { isBuiltinProvider, PROVIDER_NAME } from './ids.js';

const origin = z
  .string()
  .url()
  .refine((u) => /^https?:$/.test(new URL(u).protocol), 'must be an http(s) URL')
  .refine((u) => {
    const p = new URL(u);
    return (p.pathname === '/' || p.pathname === '') && !p.search && !p.hash && !p.username && !p.password;
  }, 'must be an origin (scheme://host[:port]) with no path, query or credentials')
  .transform((u) => new URL(u).origin);

const entry = z
  .object({
    shape: z.enum(['openai', 'anthropic']),
    origin,
    /** Particulars of a known provider: `azure` (Azure OpenAI), `openrouter`. */
    kind: z.enum(['azure', 'openrouter']).optional(),
    /** OpenAI shape: ask streams for their usage (`stream_options.include_usage`); some servers refuse it. */
    streamUsage: z.boolean().optional(),
    /** genai-prices' provider id to price this upstream's models by; default: the kind's, else any provider's. */
    priceProvider: z.string().min(1).max(64).optional(),
  })
  .strict()
  .refine((e) => e.shape === 'openai' || e.streamUsage === undefined, {
    message: 'streamUsage applies to the openai shape only',
    path: ['streamUsage'],
  })
  .refine((e) => e.kind === undefined || e.shape === 'openai', {
    message: 'azure and openrouter take the openai shape',
    path: ['kind'],
  });

export type UpstreamEntry = z.output<typeof entry>;

/** One named upstream as configured: its name is its id and its route segment. */
export interface NamedUpstream extends UpstreamEntry {
  name: string;
}

/** Most named upstreams one deployment may add: each is a route, an allowlist entry and a console label. */
const MAX_UPSTREAMS = 32;

const schema = z
  .record(z.string(), entry)
  .refine((r) => Object.keys(r).length <= MAX_UPSTREAMS, `at most ${MAX_UPSTREAMS} upstreams`)
  .superRefine((r, ctx) => {
    for (const name of Object.keys(r)) {
      if (!PROVIDER_NAME.test(name))
        ctx.addIssue({
          code: 'custom',
          path: [name],
          message: 'a name is lower-case letters, digits and "-", starting with a letter, at most 32',
        });
      else if (isBuiltinProvider(name))
        ctx.addIssue({ code: 'custom', path: [name], message: `"${name}" is a built-in provider` });
    }
  });

/**
 * The named upstreams a KEYRELAY_UPSTREAMS value describes (JSON, already read from its file if it named
 * one); throws an Error whose message says what is wrong and where.
 */
export function parseUpstreams(json: string): NamedUpstream[] {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch (err) {
    throw new Error(`not JSON (${(err as Error).message})`);
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    throw new Error(
      parsed.error.issues
        .map((i) => `${i.path.length ? `${i.path.join('.')}: ` : ''}${i.message}`)
        .join('; '),
    );
  }
  return Object.entries(parsed.data).map(([name, e]) => ({ name, ...e }));
}
