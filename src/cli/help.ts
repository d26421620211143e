/**
 * The CLI's commands as data: each one's help text and the options it takes, so every command and
 * command group answers --help, and an option a command does not take is a usage error naming it.
 */

/** Options every command takes: the server settings (same as the KEYRELAY_* variables). */
export const FLAG_TO_VAR: Record<string, string> = {
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
  'log-format': 'KEYRELAY_LOG_FORMAT',
};

const LIMITS_HELP = `limits:
  --rpm N                  requests per minute (a whole number), or "none"
  --rpm-scope S            billable (default: listings, retrievals, count_tokens not counted) or all
  --tpm N                  tokens (input + output) per minute, or "none"
  --max-concurrent N       requests in flight at once, or "none"
  --budget-usd X           spending cap in US dollars, or "none"
  --budget-period P        day or month (default month): when the budget resets
  --budget-mode M          soft (default: checked on spend so far) or hard (each request reserves
                           its upper bound first; see docs/limits.md)
  --providers LIST         openai, anthropic or both (comma-separated), or "none" for any
  --models LIST            model names, a trailing * matches a prefix (gpt-4o*), or "none" for any`;

const SETTINGS_HELP = `settings (each the same as its KEYRELAY_* variable; see the README):
  --data-dir DIR           where the SQLite files are (KEYRELAY_DATA_DIR, default ./data)
  --database-url URL       PostgreSQL instead of SQLite (KEYRELAY_DATABASE_URL)
  --redis-url URL          Redis, to share limits and revocations across instances
  ${Object.keys(FLAG_TO_VAR)
    .filter((f) => !['data-dir', 'database-url', 'redis-url'].includes(f))
    .map((f) => `--${f}`)
    .join(', ')}`;

export interface CommandSpec {
  usage: string;
  summary: string;
  /** Options beyond --json, --help and the settings. */
  options: readonly string[];
  details?: string;
}

/** The key-limit flags of `users create` and `keys limits` (parsed in main.ts, applied in commands.ts). */
export const LIMIT_FLAGS = [
  'rpm',
  'rpm-scope',
  'tpm',
  'max-concurrent',
  'budget-usd',
  'budget-period',
  'budget-mode',
  'providers',
  'models',
] as const;

export const COMMANDS: Record<string, CommandSpec> = {
  serve: {
    usage: 'keyrelay serve [settings]',
    summary: 'run the proxy and the console',
    options: [],
    details:
      'On a terminal it prints a short banner (address, console URL, data, stores) and readable log lines;\n' +
      'otherwise, or with --log-format json (KEYRELAY_LOG_FORMAT=json), one JSON object per line.',
  },
  migrate: {
    usage: 'keyrelay migrate [settings]',
    summary: 'create or upgrade the database schema',
    options: [],
  },
  'users create': {
    usage: 'keyrelay users create --email E --password P',
    summary: 'create an account and its default key (the key is shown once)',
    options: ['email', 'password'],
  },
  'keys create': {
    usage: 'keyrelay keys create --email E [--name N] [limits]',
    summary: 'create a key for an account (the key is shown once)',
    options: ['email', 'name', ...LIMIT_FLAGS],
    details: LIMITS_HELP,
  },
  'keys list': {
    usage: 'keyrelay keys list --email E',
    summary: "list an account's keys",
    options: ['email'],
  },
  'keys limits': {
    usage: 'keyrelay keys limits <key id | full key> [limits]',
    summary: "change a key's limits (the ones not given stay as they are)",
    options: [...LIMIT_FLAGS],
    details: LIMITS_HELP,
  },
  'keys revoke': {
    usage: 'keyrelay keys revoke <key id | full key>',
    summary: 'revoke a key: it stops working at once',
    options: [],
  },
  'requests list': {
    usage: 'keyrelay requests list [--email E] [--limit N]',
    summary: 'the newest request-log rows first (--limit 1–10000, default 20)',
    options: ['email', 'limit'],
  },
};

export const GROUPS = ['users', 'keys', 'requests'] as const;

const COMMON = `common options:
  --json                   print one JSON document instead of text
  -h, --help               show help for a command`;

function table(names: string[]): string {
  const width = Math.max(...names.map((n) => COMMANDS[n]!.usage.length - 'keyrelay '.length));
  return names
    .map((n) => `  ${COMMANDS[n]!.usage.slice('keyrelay '.length).padEnd(width)}  ${COMMANDS[n]!.summary}`)
    .join('\n');
}

export function mainHelp(): string {
  return `usage: keyrelay <command> [options]

commands:
${table(Object.keys(COMMANDS))}

Run "keyrelay <command> --help" for a command's options.

${COMMON}

${SETTINGS_HELP}

exit status: 0 done, 1 failed, 2 the command line was wrong`;
}

export function groupHelp(group: string): string {
  const names = Object.keys(COMMANDS).filter((n) => n.startsWith(`${group} `));
  return `usage: keyrelay ${group} <${names.map((n) => n.split(' ')[1]).join('|')}> [options]

${table(names)}

Run "keyrelay ${group} <command> --help" for a command's options.`;
}

export function commandHelp(name: string): string {
  const c = COMMANDS[name]!;
  return [
    `usage: ${c.usage}`,
    '',
    c.summary,
    c.details ? `\n${c.details}` : '',
    '',
    COMMON,
    '',
    SETTINGS_HELP,
  ]
    .filter((x, i, all) => !(x === '' && all[i - 1] === ''))
    .join('\n');
}
