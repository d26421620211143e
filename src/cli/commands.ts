/** The CLI's commands other than serve. Each opens the configured stores, acts, and closes them. */
import type { Config } from '../config.js';
import { createAccount, normalizeEmail } from '../accounts/create-account.js';
import { createKey, revokeKey, toKeyView } from '../keys/actions.js';
import { LocalKeyEventBus, type KeyEventBus } from '../keys/events.js';
import { hashKey, isWellFormedKey } from '../keys/format.js';
import { createRedisKeyEventBus } from '../keys/redis-bus.js';
import { createMetrics } from '../metrics.js';
import { openStores } from '../store/factory.js';
import type { ConfigStore, KeyView, LogStore } from '../store/types.js';

export interface CommandArgs {
  json: boolean;
  email: string | undefined;
  password: string | undefined;
  name: string | undefined;
  limit: string | undefined;
  positionals: string[];
}

type Command = (config: Readonly<Config>, args: CommandArgs) => Promise<number>;

interface Ctx {
  configStore: ConfigStore;
  logStore: LogStore;
  bus: KeyEventBus;
}

class UsageError extends Error {}

async function withStores(config: Readonly<Config>, fn: (ctx: Ctx) => Promise<void>): Promise<number> {
  const { configStore, logStore } = await openStores(config);
  // With Redis, a CLI revocation reaches running instances at once, like one made in the console.
  const quiet = { warn: () => {}, info: () => {} };
  const bus = config.redisUrl
    ? await createRedisKeyEventBus(config.redisUrl, createMetrics(), quiet)
    : new LocalKeyEventBus();
  try {
    await fn({ configStore, logStore, bus });
    return 0;
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    process.stderr.write(`keyrelay: ${message}\n`);
    return err instanceof UsageError ? 2 : 1;
  } finally {
    await bus.close();
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

export const commands: Record<string, Command> = {
  migrate: (config) =>
    withStores(config, () => {
      // openStores already ran every migration.
      process.stdout.write('database is up to date\n');
      return Promise.resolve();
    }),

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
        { accountId: owner, name: args.name ?? 'cli' },
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

  'keys revoke': (config, args) =>
    withStores(config, async ({ configStore, bus }) => {
      const ref = need(args.positionals[0], '<key id | full key>');
      const rec = isWellFormedKey(ref)
        ? await configStore.getKeyByHash(hashKey(ref))
        : await configStore.getKey(ref);
      if (!rec) throw new Error('no such key');
      const view = await revokeKey({ store: configStore, bus }, null, rec.id);
      print(args, view, `revoked ${view.id} (${view.name}, ${view.hint})`);
    }),

  'requests list': (config, args) =>
    withStores(config, async ({ configStore, logStore }) => {
      const limit = args.limit ? Number(args.limit) : 20;
      if (!Number.isInteger(limit) || limit < 1 || limit > 10_000)
        throw new UsageError('--limit must be 1–10000');
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
