/**
 * The keyrelay command (README, "The CLI"). Acts on the configured database with the same environment as the server;
 * flags override variables (`--port 9000` = KEYRELAY_PORT=9000). `--json` prints one JSON document.
 * Exit status: 0 done, 1 failed, 2 the command line was wrong (usage errors always print where to get help).
 */
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig, type Config } from '../config.js';
import { commands, type CommandArgs } from './commands.js';
import {
  COMMANDS,
  commandHelp,
  FILTER_FLAGS,
  FLAG_TO_VAR,
  GROUPS,
  groupHelp,
  LIMIT_FLAGS,
  mainHelp,
} from './help.js';

const STRING_OPTIONS = [
  'email',
  'password',
  'name',
  'limit',
  'org',
  'role',
  'format',
  'day',
  'days',
  'fingerprint',
  ...LIMIT_FLAGS,
  ...FILTER_FLAGS,
  ...Object.keys(FLAG_TO_VAR),
];
const BOOLEAN_OPTIONS = ['json', 'help', 'service'];
/** Commands that take one positional argument (a key); the rest take none. */
/** Commands that take arguments: how many, and what to say when they are missing. */
const ARGUMENTS: Record<string, { count: number; missing: string }> = {
  'keys limits': { count: 1, missing: 'give the key: its id or the full key' },
  'keys revoke': { count: 1, missing: 'give the key: its id or the full key' },
  'settings get': { count: 1, missing: 'give the setting' },
  'settings set': { count: 2, missing: 'give the setting and its value' },
  'reconcile-link': { count: 2, missing: 'give the provider (openai or anthropic) and its API key id' },
};

class Usage extends Error {
  constructor(
    message: string,
    readonly help: string,
  ) {
    super(message);
  }
}

/**
 * `--limit -3` is a value that happens to start with a dash: join it to its option, so the command can
 * say what is wrong with -3 instead of the parser guessing that a value is missing.
 */
function joinDashValues(argv: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const next = argv[i + 1];
    if (
      a.startsWith('--') &&
      STRING_OPTIONS.includes(a.slice(2)) &&
      next !== undefined &&
      /^-\d/.test(next)
    ) {
      out.push(`${a}=${next}`);
      i++;
    } else out.push(a);
  }
  return out;
}

/** The parser's errors, in the words of someone typing the command. */
function parseProblem(err: unknown): string {
  const code = (err as { code?: string }).code;
  const message = err instanceof Error ? err.message : String(err);
  const option = /'(-[^' ]+)/.exec(message)?.[1] ?? '';
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') return `unknown option ${option}`;
  if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
    return BOOLEAN_OPTIONS.includes(option.replace(/^-+/, '')) || option === '-h'
      ? `${option} takes no value`
      : `${option} needs a value`;
  }
  return message;
}

interface Parsed {
  name: string;
  values: Record<string, string | boolean | undefined>;
  positionals: string[];
}

function parse(argv: string[]): Parsed | { help: string } {
  let values: Record<string, string | boolean | undefined>;
  let positionals: string[];
  try {
    ({ values, positionals } = parseArgs({
      args: joinDashValues(argv),
      allowPositionals: true,
      strict: true,
      options: {
        ...Object.fromEntries(STRING_OPTIONS.map((f) => [f, { type: 'string' as const }])),
        json: { type: 'boolean' },
        service: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (err) {
    throw new Usage(parseProblem(err), 'keyrelay --help');
  }
  const [cmd, sub, ...rest] = positionals;
  if (!cmd) {
    if (values.help) return { help: mainHelp() };
    throw new Usage('no command given', 'keyrelay --help');
  }
  let name: string;
  if ((GROUPS as readonly string[]).includes(cmd)) {
    if (!sub) {
      if (values.help) return { help: groupHelp(cmd) };
      throw new Usage(`"${cmd}" needs a command:\n\n${groupHelp(cmd)}`, `keyrelay ${cmd} --help`);
    }
    name = `${cmd} ${sub}`;
    if (!COMMANDS[name])
      throw new Usage(`unknown command "${name}"\n\n${groupHelp(cmd)}`, `keyrelay ${cmd} --help`);
    positionals = rest;
  } else {
    name = cmd;
    if (!COMMANDS[name]) throw new Usage(`unknown command "${cmd}"`, 'keyrelay --help');
    positionals = [sub, ...rest].filter((x): x is string => x !== undefined);
  }
  if (values.help) return { help: commandHelp(name) };
  const allowed = new Set([...COMMANDS[name]!.options, ...Object.keys(FLAG_TO_VAR), 'json', 'help']);
  const stray = Object.keys(values).find((k) => values[k] !== undefined && !allowed.has(k));
  if (stray) throw new Usage(`keyrelay ${name} does not take --${stray}`, `keyrelay ${name} --help`);
  const want = ARGUMENTS[name]?.count ?? 0;
  if (positionals.length > want)
    throw new Usage(`unexpected argument "${positionals[want]}"`, `keyrelay ${name} --help`);
  if (positionals.length < want) throw new Usage(ARGUMENTS[name]!.missing, `keyrelay ${name} --help`);
  return { name, values, positionals };
}

async function main(argv: string[]): Promise<number> {
  let parsed: Parsed | { help: string };
  try {
    parsed = parse(argv);
  } catch (err) {
    if (!(err instanceof Usage)) throw err;
    process.stderr.write(`keyrelay: ${err.message}\n(see "${err.help}")\n`);
    return 2;
  }
  if ('help' in parsed) {
    process.stdout.write(parsed.help + '\n');
    return 0;
  }
  const { name, values, positionals } = parsed;
  const overrides: Record<string, string> = {};
  for (const [flag, variable] of Object.entries(FLAG_TO_VAR)) {
    const v = values[flag];
    if (typeof v === 'string') overrides[variable] = v;
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
  // Loaded only for serve: the other commands start faster without the HTTP stack and price data.
  if (name === 'serve') return (await import('./serve.js')).serve(config);
  const args: CommandArgs = {
    json: values.json === true,
    email: values.email as string | undefined,
    password: values.password as string | undefined,
    name: values.name as string | undefined,
    limit: values.limit as string | undefined,
    from: values.from as string | undefined,
    to: values.to as string | undefined,
    org: values.org as string | undefined,
    role: values.role as string | undefined,
    format: values.format as string | undefined,
    day: values.day as string | undefined,
    fingerprint: values.fingerprint as string | undefined,
    days: values.days as string | undefined,
    service: values.service === true,
    filters: Object.fromEntries(
      FILTER_FLAGS.map((f) => [f, values[f]]).filter(([, v]) => typeof v === 'string'),
    ) as CommandArgs['filters'],
    limits: Object.fromEntries(
      LIMIT_FLAGS.map((f) => [f, values[f]]).filter(([, v]) => typeof v === 'string'),
    ) as CommandArgs['limits'],
    positionals,
  };
  return commands[name]!(config, args);
}

main(process.argv.slice(2)).then(
  (code) => {
    // serve keeps the process alive itself; the other commands end here.
    if (code !== -1) process.exitCode = code;
  },
  (err: unknown) => {
    // Exit, not exitCode: a start that failed after opening its stores (a pool, a Redis connection retrying)
    // would keep the process up and never listening, where a supervisor restarts only a process that exits.
    process.stderr.write(`keyrelay: ${err instanceof Error ? err.message : String(err)}\n`, () =>
      process.exit(1),
    );
  },
);
