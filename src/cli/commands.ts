/** The CLI's commands other than serve. Each opens the configured stores, acts, and closes them. */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Config } from '../config.js';
import { ApiError } from '../errors.js';
import { createAccount, normalizeEmail } from '../accounts/create-account.js';
import { createKey, revokeKey, setKeyLimits, toKeyView } from '../keys/actions.js';
import { LocalKeyEventBus, type KeyEventBus } from '../keys/events.js';
import { hashKey, isWellFormedKey } from '../keys/format.js';
import { createMetrics } from '../metrics.js';
import { InvalidFilterError } from '../store/errors.js';
import { openStores } from '../store/factory.js';
import type { Provider } from '../types.js';
import { LIMIT_FLAGS } from './help.js';
import type { ConfigStore, KeyLimits, KeyView, LogStore } from '../store/types.js';

export interface CommandArgs {
  json: boolean;
  email: string | undefined;
  password: string | undefined;
  name: string | undefined;
  limit: string | undefined;
  /** Limit flags as given (see LIMIT_FLAGS); absent flags are left out. */
  limits: Partial<Record<LimitFlag, string>>;
  positionals: string[];
}

type LimitFlag = (typeof LIMIT_FLAGS)[number];

/** Flags → a limits patch; "none" clears a limit. Ranges are checked by the key action, as in the console. */
function limitsPatch(flags: CommandArgs['limits']): Partial<KeyLimits> {
  const patch: Partial<KeyLimits> = {};
  const num = (flag: LimitFlag, v: string) => {
    if ((flag === 'rpm' || flag === 'tpm' || flag === 'max-concurrent') && !/^\d+$/.test(v))
      throw new UsageError(`--${flag} must be a whole number, or "none" (got ${v})`);
    if (!/^\d+(\.\d+)?$/.test(v)) throw new UsageError(`--${flag} must be a number or "none" (got ${v})`);
    return Number(v);
  };
  const list = (v: string) =>
    v
      .split(',')
      .map((x) => x.trim())
      .filter(Boolean);
  for (const [flag, value] of Object.entries(flags) as [LimitFlag, string][]) {
    const none = value === 'none';
    if (flag === 'rpm') patch.rate_limit_rpm = none ? null : num(flag, value);
    else if (flag === 'tpm') patch.rate_limit_tpm = none ? null : num(flag, value);
    else if (flag === 'max-concurrent') patch.max_concurrent = none ? null : num(flag, value);
    else if (flag === 'rpm-scope') {
      if (value !== 'billable' && value !== 'all')
        throw new UsageError('--rpm-scope must be billable or all');
      patch.rate_limit_scope = value;
    } else if (flag === 'budget-mode') {
      if (value !== 'soft' && value !== 'hard') throw new UsageError('--budget-mode must be soft or hard');
      patch.budget_mode = value;
    } else if (flag === 'budget-usd') patch.budget_usd = none ? null : num(flag, value);
    else if (flag === 'budget-period') {
      if (value !== 'day' && value !== 'month') throw new UsageError('--budget-period must be day or month');
      patch.budget_period = value;
    } else if (flag === 'providers') patch.allowed_providers = none ? null : (list(value) as Provider[]);
    else patch.allowed_models = none ? null : list(value);
  }
  return patch;
}

type Command = (config: Readonly<Config>, args: CommandArgs) => Promise<number>;

interface Ctx {
  configStore: ConfigStore;
  logStore: LogStore;
  bus: KeyEventBus;
}

class UsageError extends Error {}

/** The key actions' messages name API fields; on the command line they are flags. */
function inFlagTerms(message: string): string {
  return message
    .replace(/rate_limit_rpm/g, '--rpm')
    .replace(/rate_limit_tpm/g, '--tpm')
    .replace(/max_concurrent/g, '--max-concurrent')
    .replace(/rate_limit_scope/g, '--rpm-scope')
    .replace(/budget_mode/g, '--budget-mode')
    .replace(/budget_usd/g, '--budget-usd')
    .replace(/budget_period/g, '--budget-period')
    .replace(/allowed_providers/g, '--providers')
    .replace(/allowed_models/g, '--models')
    .replace(/must be null or/g, 'must be "none" or')
    .replace(/Key name/g, '--name');
}

/**
 * Whether the configured database already holds keyrelay's schema. Only serve and migrate may create
 * one: anything else finding none means a mistyped --data-dir or URL, and must not leave an empty database.
 */
async function databaseExists(config: Readonly<Config>): Promise<boolean> {
  if (!config.databaseUrl) return existsSync(join(config.dataDir, 'keyrelay.db'));
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: config.databaseUrl });
  await client.connect();
  try {
    const r = await client.query<{ ok: boolean }>("SELECT to_regclass('accounts') IS NOT NULL AS ok");
    return r.rows[0]?.ok === true;
  } finally {
    await client.end();
  }
}

async function withStores(
  config: Readonly<Config>,
  fn: (ctx: Ctx) => Promise<void>,
  opts: { create?: boolean } = {},
): Promise<number> {
  if (!opts.create && !(await databaseExists(config))) {
    const where = config.databaseUrl ? 'in that PostgreSQL database' : `in ${config.dataDir}`;
    process.stderr.write(
      `keyrelay: no keyrelay database ${where}. Check --data-dir / --database-url ` +
        `(KEYRELAY_DATA_DIR / KEYRELAY_DATABASE_URL), or create one with "keyrelay migrate".\n`,
    );
    return 1;
  }
  const { configStore, logStore } = await openStores(config);
  // With Redis, a CLI revocation reaches running instances at once, like one made in the console.
  const quiet = { warn: () => {}, info: () => {} };
  const redis = config.redisUrl
    ? await (await import('../redis.js')).openRedis(config.redisUrl, createMetrics())
    : null;
  const bus = redis
    ? await (await import('../keys/redis-bus.js')).createRedisKeyEventBus(redis, quiet)
    : new LocalKeyEventBus();
  try {
    await fn({ configStore, logStore, bus });
    return 0;
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    process.stderr.write(`keyrelay: ${inFlagTerms(message)}\n`);
    // A value the key actions refuse (400) was given on the command line: a usage error, like a bad flag.
    const refusedInput = (err instanceof ApiError && err.status === 400) || err instanceof InvalidFilterError;
    return err instanceof UsageError || refusedInput ? 2 : 1;
  } finally {
    await bus.close();
    await redis?.close();
    await logStore.close();
    await configStore.close();
  }
}

function need(value: string | undefined, flag: string): string {
  if (!value) throw new UsageError(`${flag} is required`);
  return value;
}

async function accountId(store: ConfigStore, email: string | undefined): Promise<string> {
  const account = await store.getAccountByEmail(normalizeEmail(need(email, '--email')));
  if (!account) throw new Error(`no account with email ${email}`);
  return account.id;
}

const print = (args: CommandArgs, json: unknown, text: string) =>
  process.stdout.write(args.json ? JSON.stringify(json, null, 2) + '\n' : text + '\n');

const keyLine = (k: KeyView) =>
  `${k.id}  ${k.name.padEnd(16)} ${k.hint}  ${k.status.padEnd(7)}  created ${k.created_at}  last used ${k.last_used_at ?? 'never'}`;

async function findKey(store: ConfigStore, ref: string) {
  const rec = isWellFormedKey(ref) ? await store.getKeyByHash(hashKey(ref)) : await store.getKey(ref);
  // Never echo a full key back: it would land in shell logs and scrollback.
  if (!rec)
    throw new Error(
      isWellFormedKey(ref)
        ? 'no such key: that full key is not known to this database'
        : `no key with id ${ref} (see "keyrelay keys list --email E", or give the full key)`,
    );
  return rec;
}

const limitsLine = (k: KeyLimits) =>
  [
    `providers ${k.allowed_providers?.join(',') ?? 'any'}`,
    `models ${k.allowed_models?.join(',') ?? 'any'}`,
    `rpm ${k.rate_limit_rpm === null ? 'unlimited' : `${k.rate_limit_rpm} (${k.rate_limit_scope})`}`,
    `tpm ${k.rate_limit_tpm ?? 'unlimited'}`,
    `in-flight ${k.max_concurrent ?? 'unlimited'}`,
    `budget ${k.budget_usd === null ? 'unlimited' : `$${k.budget_usd}/${k.budget_period} ${k.budget_mode}`}`,
  ].join('  ');

export const commands: Record<string, Command> = {
  migrate: (config) =>
    withStores(
      config,
      () => {
        // openStores already ran every migration.
        process.stdout.write('database is up to date\n');
        return Promise.resolve();
      },
      { create: true },
    ),

  'users create': (config, args) =>
    withStores(config, async ({ configStore, bus }) => {
      const { account, key } = await createAccount(
        { store: configStore, bus },
        { email: need(args.email, '--email'), password: need(args.password, '--password') },
      );
      const json = {
        account: { id: account.id, email: account.email },
        key: { id: key.view.id, name: key.view.name, hint: key.view.hint, key: key.key },
      };
      print(args, json, `created ${account.email}\ndefault key (shown once): ${key.key}`);
    }),

  'keys create': (config, args) =>
    withStores(config, async ({ configStore, bus }) => {
      const owner = await accountId(configStore, args.email);
      const created = await createKey(
        { store: configStore, bus },
        { accountId: owner, name: args.name ?? 'cli', limits: limitsPatch(args.limits) },
      );
      print(
        args,
        { ...created.view, key: created.key },
        `key ${created.view.name} (shown once): ${created.key}`,
      );
    }),

  'keys list': (config, args) =>
    withStores(config, async ({ configStore }) => {
      const keys = (await configStore.listKeys(await accountId(configStore, args.email))).map((k) =>
        toKeyView(k),
      );
      print(args, keys, keys.map(keyLine).join('\n') || 'no keys');
    }),

  'keys limits': (config, args) =>
    withStores(config, async ({ configStore, bus }) => {
      const patch = limitsPatch(args.limits);
      if (Object.keys(patch).length === 0) throw new UsageError('give at least one limit flag');
      const rec = await findKey(configStore, need(args.positionals[0], '<key id | full key>'));
      const view = await setKeyLimits({ store: configStore, bus }, null, rec.id, patch);
      print(args, view, `${view.id} (${view.name}): ${limitsLine(view)}`);
    }),

  'keys revoke': (config, args) =>
    withStores(config, async ({ configStore, bus }) => {
      const rec = await findKey(configStore, need(args.positionals[0], '<key id | full key>'));
      const view = await revokeKey({ store: configStore, bus }, null, rec.id);
      print(args, view, `revoked ${view.id} (${view.name}, ${view.hint})`);
    }),

  'requests list': (config, args) =>
    withStores(config, async ({ configStore, logStore }) => {
      const limit = args.limit ? Number(args.limit) : 20;
      if (!/^\d+$/.test(args.limit ?? '20') || !Number.isInteger(limit) || limit < 1 || limit > 10_000)
        throw new UsageError(`--limit must be a whole number from 1 to 10000 (got ${args.limit})`);
      const owner = args.email ? await accountId(configStore, args.email) : undefined;
      const rows = await logStore.listRecent({ limit, ...(owner ? { account_id: owner } : {}) });
      const text = rows
        .map(
          (r) =>
            `${r.created_at}  ${r.id}  ${r.provider.padEnd(9)} ${String(r.status).padEnd(3)} ${r.outcome.padEnd(14)} ` +
            `${(r.model ?? '-').padEnd(24)} in=${r.input_tokens ?? '-'} out=${r.output_tokens ?? '-'} ` +
            `cost=${r.cost_usd === null ? 'unknown' : '$' + r.cost_usd.toFixed(6)} ${r.latency_ms.toFixed(1)}ms`,
        )
        .join('\n');
      print(args, rows, text || 'no requests');
    }),
};
