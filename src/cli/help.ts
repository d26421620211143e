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
  --budget-unpriced U      under a hard budget, calls keyrelay cannot price: refuse (default) or allow
  --user-rpm N             requests per minute for each end user (proxy-user) of the key, or "none"
  --user-budget-usd X      spending cap for each end user of the key, in US dollars, or "none"
  --user-budget-period P   day or month (default month)
  --user-budget-mode M     soft (default) or hard, as --budget-mode
  --providers LIST         openai, anthropic, named upstreams (comma-separated), or "none" for any
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
  'budget-unpriced',
  'user-rpm',
  'user-budget-usd',
  'user-budget-period',
  'user-budget-mode',
  'providers',
  'models',
] as const;

/** The request-log filters of `requests list` and `requests export` (applied in commands.ts). */
export const FILTER_FLAGS = [
  'key',
  'provider',
  'model',
  'status',
  'from',
  'to',
  'user',
  'session',
  'property',
] as const;

const FILTERS_HELP = `filters (each needs --email; rows must match all given):
  --key ID                 one key's rows
  --provider P             openai or anthropic
  --model M                the model as logged
  --status N               the HTTP status
  --from TIME, --to TIME   ISO-8601 times: from inclusive, to exclusive
  --user U                 the end user (proxy-user, the body's user field)
  --session S              the session (proxy-session, or the client's own)
  --property NAME:VALUE    a custom property (proxy-property-NAME)`;

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
    usage: 'keyrelay keys create --email E [--org O] [--service] [--name N] [limits]',
    summary:
      'create a key held by an account, in an organization it is in (default: its personal one); with ' +
      "--service, the organization's key, held by nobody (E, an owner or admin there, is recorded as its creator)",
    options: ['email', 'org', 'service', 'name', ...LIMIT_FLAGS],
    details: LIMITS_HELP,
  },
  'keys list': {
    usage: 'keyrelay keys list --email E | --org O',
    summary: "list an account's keys, or an organization's (service keys included)",
    options: ['email', 'org'],
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
  'orgs list': {
    usage: 'keyrelay orgs list --email E',
    summary: "an account's organizations and its role in each",
    options: ['email'],
  },
  'orgs create': {
    usage: 'keyrelay orgs create --email E --name N',
    summary: 'create an organization owned by an account',
    options: ['email', 'name'],
  },
  'orgs audit-retention': {
    usage: 'keyrelay orgs audit-retention --org O [--days N|off]',
    summary:
      'show or set how many days an organization keeps its audit entries (off: until dropped by hand); older ' +
      'ones are deleted hourly',
    options: ['org', 'days'],
  },
  'members list': {
    usage: 'keyrelay members list --org O',
    summary: "an organization's members and their roles",
    options: ['org'],
  },
  'members add': {
    usage: 'keyrelay members add --org O --email E --role R',
    summary: 'add an account to an organization, or change its role (owner, admin, member, viewer)',
    options: ['org', 'email', 'role'],
  },
  'members limits': {
    usage:
      'keyrelay members limits --org O --email E [--rpm N|none] [--budget-usd X|none] [--budget-period day|month] [--budget-mode soft|hard]',
    summary:
      "show or change a member's limits across all their keys in the organization, and their budget's spend",
    options: ['org', 'email', 'rpm', 'budget-usd', 'budget-period', 'budget-mode'],
    details:
      "Both the member's limits and each key's own apply; the tighter one refuses. Service keys are no " +
      "member's. none clears a limit; the ones not given stay as they are. Every instance applies a change " +
      'within about a second. Audited as member.limits.',
  },
  'members remove': {
    usage: 'keyrelay members remove --org O --email E',
    summary: 'remove a member; the keys they hold there are revoked at once',
    options: ['org', 'email'],
  },
  'requests list': {
    usage: 'keyrelay requests list [--email E] [--limit N] [filters]',
    summary: 'the newest request-log rows first (--limit 1–10000, default 20)',
    options: ['email', 'limit', ...FILTER_FLAGS],
    details: FILTERS_HELP,
  },
  'requests export': {
    usage: 'keyrelay requests export --format csv|ndjson --email E [--limit N] [filters]',
    summary: "an account's request log to stdout as CSV or NDJSON, newest first (all rows unless --limit)",
    options: ['format', 'email', 'limit', ...FILTER_FLAGS],
    details:
      FILTERS_HELP +
      '\n\nStreamed: memory stays flat however many rows. CSV: RFC 4180 with a header row; text a spreadsheet\n' +
      "would run as a formula (=, +, -, @ first) starts with '. Bodies and headers are not exported.",
  },
  'settings get': {
    usage: 'keyrelay settings get <setting>',
    summary: "an instance setting's value (alerts_allow_private_targets)",
    options: [],
  },
  'settings set': {
    usage: 'keyrelay settings set <setting> <value>',
    summary: 'change an instance setting for every instance on this database',
    options: [],
    details:
      'alerts_allow_private_targets true|false: whether alert webhooks may point at loopback and private\n' +
      'addresses (default false; keyrelay itself is refused either way: docs/alerts.md).',
  },
  'alerts list': {
    usage: 'keyrelay alerts list --org O [--limit N]',
    summary: "an organization's alert rules and its newest deliveries (--limit 1–500, default 20)",
    options: ['org', 'limit'],
  },
  prices: {
    usage: 'keyrelay prices [--from DATE] [--to DATE]',
    summary: 'models and tool fees the price library could not price in the log, with counts',
    options: ['from', 'to'],
    details:
      'Unpriced calls (cost unknown) by model and reason, and the fees left out of partial costs by model,\n' +
      'across every account; dates are UTC days (2026-11-01) or ISO times. Default: the last 30 days.',
  },
  reconcile: {
    usage: 'keyrelay reconcile [--day DATE]',
    summary: "keyrelay's logged cost and tokens for a day beside the providers' cost and usage reports",
    options: ['day'],
    details:
      "Reads OpenAI's Costs and Usage APIs with OPENAI_ADMIN_KEY and Anthropic's cost and usage reports with\nANTHROPIC_ADMIN_KEY " +
      "(organization admin keys, from the environment only: never stored or printed), at each provider's\n" +
      "configured origin, and sets them beside every account's rows of that UTC day, per model and per\n" +
      'provider API key linked with reconcile-link, with the likely reason for each difference. Default day: yesterday. Exit status 1 when a report could not be\n' +
      'read (the other provider is still shown).',
  },
  'reconcile-link': {
    usage: 'keyrelay reconcile-link <provider> <key id>',
    summary: "tie a provider's API key id (its usage report's api_key_id) to a credential keyrelay saw",
    options: ['fingerprint'],
    details:
      '<provider> is openai or anthropic; --fingerprint FP|none instead of the credential on standard input.\n' +
      "The provider's usage report names its API key ids (key_…, apikey_…), never the keys; keyrelay knows\n" +
      'a credential only by its keyed fingerprint. Give the credential on standard input (it is hashed and\n' +
      'forgotten, never stored or printed), or its fingerprint (the console lists them) with --fingerprint;\n' +
      "--fingerprint none removes the link. `keyrelay reconcile` then compares that key's tokens.\n" +
      '  printf %s "$KEY" | keyrelay reconcile-link openai key_abc123',
  },
};

export const GROUPS = ['users', 'keys', 'orgs', 'members', 'requests', 'settings', 'alerts'] as const;

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
