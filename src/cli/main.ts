/**
 * The keyrelay command (SPEC §4). Acts on the configured database with the same environment as the server;
 * flags override variables (`--port 9000` = KEYRELAY_PORT=9000). `--json` prints one JSON document.
 */
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig, type Config } from '../config.js';
import { commands, LIMIT_FLAGS, type CommandArgs } from './commands.js';

const FLAG_TO_VAR: Record<string, string> = {
  host: 'KEYRELAY_HOST',
  port: 'KEYRELAY_PORT',
  'public-url': 'KEYRELAY_PUBLIC_URL',
  'data-dir': 'KEYRELAY_DATA_DIR',
  'database-url': 'KEYRELAY_DATABASE_URL',
  'redis-url': 'KEYRELAY_REDIS_URL',
  'openai-upstream': 'KEYRELAY_OPENAI_UPSTREAM',
  'anthropic-upstream': 'KEYRELAY_ANTHROPIC_UPSTREAM',
  signup: 'KEYRELAY_SIGNUP',
  'log-level': 'KEYRELAY_LOG_LEVEL',
};

const USAGE = `usage: keyrelay <command> [options]

  serve                                  run the proxy and console
  users create --email E --password P    create an account and its default key
  keys create --email E [--name N] [limits]  create a key
  keys list --email E                    list an account's keys
  keys limits <key id | full key> limits set a key's limits (others unchanged)
  keys revoke <key id | full key>        revoke a key
  requests list [--email E] [--limit N]  newest request-log rows first
  migrate                                create or upgrade the database schema

limits: --rpm N, --budget-usd X, --budget-period day|month, --providers openai,anthropic,
        --models gpt-4o,claude-* (a value of "none" removes that limit)

options: --json, and ${Object.keys(FLAG_TO_VAR)
  .map((f) => `--${f}`)
  .join(', ')} (same as the KEYRELAY_* variables)`;

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      json: { type: 'boolean', default: false },
      email: { type: 'string' },
      password: { type: 'string' },
      name: { type: 'string' },
      limit: { type: 'string' },
      ...Object.fromEntries(LIMIT_FLAGS.map((f) => [f, { type: 'string' as const }])),
      help: { type: 'boolean', short: 'h', default: false },
      ...Object.fromEntries(Object.keys(FLAG_TO_VAR).map((f) => [f, { type: 'string' as const }])),
    },
  });
  if (values.help || positionals.length === 0) {
    process.stdout.write(USAGE + '\n');
    return positionals.length === 0 && !values.help ? 2 : 0;
  }
  const overrides: Record<string, string> = {};
  for (const [flag, name] of Object.entries(FLAG_TO_VAR)) {
    const v = (values as Record<string, unknown>)[flag];
    if (typeof v === 'string') overrides[name] = v;
  }
  let config: Readonly<Config>;
  try {
    config = loadConfig(undefined, overrides);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`keyrelay: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  const [cmd, sub, ...rest] = positionals;
  // Loaded only for serve: the other commands start faster without the HTTP stack and price data.
  if (cmd === 'serve') return (await import('./serve.js')).serve(config);
  const name = sub && commands[`${cmd} ${sub}`] ? `${cmd} ${sub}` : cmd!;
  const command = commands[name];
  if (!command) {
    process.stderr.write(`keyrelay: unknown command "${positionals.join(' ')}"\n\n${USAGE}\n`);
    return 2;
  }
  const args: CommandArgs = {
    json: values.json === true,
    email: values.email,
    password: values.password,
    name: values.name,
    limit: values.limit,
    limits: Object.fromEntries(
      LIMIT_FLAGS.map((f) => [f, (values as Record<string, unknown>)[f]]).filter(
        ([, v]) => typeof v === 'string',
      ),
    ) as CommandArgs['limits'],
    positionals: name === cmd ? [sub, ...rest].filter((x): x is string => !!x) : rest,
  };
  return command(config, args);
}

main(process.argv.slice(2)).then(
  (code) => {
    // serve keeps the process alive itself; the other commands end here.
    if (code !== -1) process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`keyrelay: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  },
);
