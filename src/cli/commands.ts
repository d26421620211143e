/** The CLI's commands other than serve. Each opens the configured stores, acts, and closes them. */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Config } from '../config.js';
import { credentialFingerprint, FINGERPRINT_SECRET } from '../credential-fingerprint.js';
import { ALLOW_PRIVATE_SETTING } from '../alerts/target.js';
import { domainError, isDomainError, type DomainErrorCode } from '../errors.js';
import { createOrg, MAX_AUDIT_RETENTION_DAYS, removeMember, setMemberLimits } from '../orgs/actions.js';
import { newId } from '../ids.js';
import { can } from '../orgs/roles.js';
import { createAccount, normalizeEmail } from '../accounts/create-account.js';
import { installOwnerId } from '../accounts/signup-policy.js';
import { createKey, revokeKey, setKeyLimits, toKeyView } from '../keys/actions.js';
import { LocalKeyEventBus, type KeyEventBus } from '../keys/events.js';
import { hashKey, isWellFormedKey } from '../keys/format.js';
import { createMetrics } from '../metrics.js';
import { registerUpstreams } from '../providers/index.js';
import { openStores } from '../store/factory.js';
import { FILTER_FLAGS, LIMIT_FLAGS } from './help.js';
import { EXPORT_FORMATS, exportText, type ExportFormat } from '../log/export.js';
import { providerIds } from '../providers/index.js';
import {
  createRedisCounters,
  memberSpendSince,
  NO_LOCAL_COUNTS,
  readMemberBudgetStatus,
  readBudgetStatus,
  readRateStatus,
  waitInWords,
  type SharedCounters,
} from '../limits/index.js';
import {
  ORG_ROLES,
  type ConfigStore,
  type KeyBudgetStatus,
  type KeyLimits,
  type KeyRateStatus,
  type KeyView,
  type MemberLimits,
  type RateHeadroom,
  type LogStore,
  type OrgRole,
  type RequestFilter,
} from '../store/types.js';

export interface CommandArgs {
  json: boolean;
  email: string | undefined;
  password: string | undefined;
  name: string | undefined;
  limit: string | undefined;
  /** `prices`: the range, ISO dates or times. */
  from: string | undefined;
  to: string | undefined;
  org: string | undefined;
  role: string | undefined;
  format: string | undefined;
  /** `reconcile`: the UTC day, YYYY-MM-DD. */
  day: string | undefined;
  /** `reconcile-link`: a credential's fingerprint, or `none` to unlink. */
  fingerprint: string | undefined;
  /** `orgs audit-retention`: a number of days, or `off`. */
  days: string | undefined;
  /** `keys create`: the organization's key, held by no member. */
  service: boolean;
  /** Request-log filter flags as given (see FILTER_FLAGS). */
  filters: Partial<Record<FilterFlag, string>>;
  /** Limit flags as given (see LIMIT_FLAGS); absent flags are left out. */
  limits: Partial<Record<LimitFlag, string>>;
  positionals: string[];
}

type LimitFlag = (typeof LIMIT_FLAGS)[number];
type FilterFlag = (typeof FILTER_FLAGS)[number];

/** Flags → a limits patch; "none" clears a limit. Ranges are checked by the key action, as in the console. */
function limitsPatch(flags: CommandArgs['limits']): Partial<KeyLimits> {
  const patch: Partial<KeyLimits> = {};
  const num = (flag: LimitFlag, v: string) => {
    if (/^-\d/.test(v)) throw new UsageError(`--${flag} must be more than 0, or "none" (got ${v})`);
    if (
      (flag === 'rpm' || flag === 'user-rpm' || flag === 'tpm' || flag === 'max-concurrent') &&
      !/^\d+$/.test(v)
    )
      throw new UsageError(`--${flag} must be a whole number, 1 or more, or "none" (got ${v})`);
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
    else if (flag === 'user-rpm') patch.user_rate_limit_rpm = none ? null : num(flag, value);
    else if (flag === 'user-budget-usd') patch.user_budget_usd = none ? null : num(flag, value);
    else if (flag === 'user-budget-period') {
      if (value !== 'day' && value !== 'month')
        throw new UsageError('--user-budget-period must be day or month');
      patch.user_budget_period = value;
    } else if (flag === 'user-budget-mode') {
      if (value !== 'soft' && value !== 'hard')
        throw new UsageError('--user-budget-mode must be soft or hard');
      patch.user_budget_mode = value;
    } else if (flag === 'max-concurrent') patch.max_concurrent = none ? null : num(flag, value);
    else if (flag === 'rpm-scope') {
      if (value !== 'billable' && value !== 'all')
        throw new UsageError('--rpm-scope must be billable or all');
      patch.rate_limit_scope = value;
    } else if (flag === 'budget-mode') {
      if (value !== 'soft' && value !== 'hard') throw new UsageError('--budget-mode must be soft or hard');
      patch.budget_mode = value;
    } else if (flag === 'budget-unpriced') {
      if (value !== 'refuse' && value !== 'allow')
        throw new UsageError('--budget-unpriced must be refuse or allow');
      patch.budget_unpriced = value;
    } else if (flag === 'budget-usd') patch.budget_usd = none ? null : num(flag, value);
    else if (flag === 'budget-period') {
      if (value !== 'day' && value !== 'month') throw new UsageError('--budget-period must be day or month');
      patch.budget_period = value;
    } else if (flag === 'providers') patch.allowed_providers = none ? null : list(value);
    else patch.allowed_models = none ? null : list(value);
  }
  return patch;
}

/** Filter flags → a filter of the account's rows (times are checked by the store: invalid_time). */
function requestFilter(accountId: string, flags: CommandArgs['filters']): RequestFilter {
  const f: RequestFilter = { account_id: accountId };
  if (flags.key) f.key_id = flags.key;
  if (flags.provider !== undefined) {
    const p = providerIds().find((id) => id === flags.provider);
    if (!p)
      throw new UsageError(`--provider must be one of ${providerIds().join(', ')} (got ${flags.provider})`);
    f.provider = p;
  }
  if (flags.model) f.model = flags.model;
  if (flags.status !== undefined) {
    if (!/^\d{3}$/.test(flags.status))
      throw new UsageError(`--status must be an HTTP status (got ${flags.status})`);
    f.status = Number(flags.status);
  }
  if (flags.from) f.from = flags.from;
  if (flags.to) f.to = flags.to;
  if (flags.user) f.end_user = flags.user;
  if (flags.session) f.session = flags.session;
  if (flags.property !== undefined) {
    const colon = flags.property.indexOf(':');
    if (colon < 1) throw new UsageError(`--property must be NAME:VALUE (got ${flags.property})`);
    f.property = {
      name: flags.property.slice(0, colon).toLowerCase(),
      value: flags.property.slice(colon + 1),
    };
  }
  return f;
}

/** Writes to stdout as fast as it reads, no faster: a slow pipe holds the export, not memory. */
async function writeOut(text: string): Promise<void> {
  if (process.stdout.write(text)) return;
  await new Promise<void>((resolve, reject) => {
    const done = (err?: Error) => {
      process.stdout.off('drain', done);
      process.stdout.off('error', done);
      if (err) reject(err);
      else resolve();
    };
    process.stdout.on('drain', done);
    process.stdout.on('error', done);
  });
}

function parseLimit(value: string | undefined, fallback: number, max: number): number {
  const raw = value ?? String(fallback);
  const limit = Number(raw);
  if (!/^\d+$/.test(raw) || !Number.isInteger(limit) || limit < 1 || limit > max)
    throw new UsageError(`--limit must be a whole number from 1 to ${max} (got ${value})`);
  return limit;
}

type Command = (config: Readonly<Config>, args: CommandArgs) => Promise<number>;

interface Ctx {
  configStore: ConfigStore;
  logStore: LogStore;
  bus: KeyEventBus;
  /** Every instance's rate counters, with Redis; null without (each instance counts in its own memory). */
  counters: SharedCounters | null;
}

class UsageError extends Error {}

/** Exit statuses (README, "The CLI"): done, failed, or the command line was wrong. */
const EXIT = { ok: 0, failed: 1, usage: 2 } as const;

/**
 * A domain error's exit status, by code: a value the domain refuses was given on the command line, so it
 * is a usage error like a bad flag; anything else the command could not do is a failure.
 */
const EXIT_BY_CODE: Record<DomainErrorCode, number> = {
  invalid_email: EXIT.usage,
  weak_password: EXIT.usage,
  invalid_name: EXIT.usage,
  invalid_grace: EXIT.usage,
  invalid_limits: EXIT.usage,
  invalid_time: EXIT.usage,
  invalid_cursor: EXIT.usage,
  invalid_sort: EXIT.usage,
  signup_closed: EXIT.failed,
  key_not_found: EXIT.failed,
  email_taken: EXIT.failed,
  key_not_active: EXIT.failed,
  invalid_org_name: EXIT.usage,
  forbidden: EXIT.failed,
  org_not_found: EXIT.failed,
  member_not_found: EXIT.failed,
  invite_invalid: EXIT.failed,
  already_member: EXIT.failed,
  last_owner: EXIT.failed,
  invalid_sso: EXIT.usage,
  sso_domain_taken: EXIT.failed,
  sso_unavailable: EXIT.failed,
  invalid_alert_rule: EXIT.usage,
  alert_target_refused: EXIT.usage,
  alert_rule_not_found: EXIT.failed,
};

function exitStatus(err: unknown): number {
  if (err instanceof UsageError) return EXIT.usage;
  return isDomainError(err) ? EXIT_BY_CODE[err.code] : EXIT.failed;
}

/** The key actions' messages name API fields; on the command line they are flags. */
function inFlagTerms(message: string): string {
  return message
    .replace(/user_rate_limit_rpm/g, '--user-rpm')
    .replace(/user_budget_usd/g, '--user-budget-usd')
    .replace(/user_budget_period/g, '--user-budget-period')
    .replace(/user_budget_mode/g, '--user-budget-mode')
    .replace(/rate_limit_rpm/g, '--rpm')
    .replace(/rate_limit_tpm/g, '--tpm')
    .replace(/max_concurrent/g, '--max-concurrent')
    .replace(/rate_limit_scope/g, '--rpm-scope')
    .replace(/budget_mode/g, '--budget-mode')
    .replace(/budget_unpriced/g, '--budget-unpriced')
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
  // Key allowlists may name this deployment's named upstreams.
  registerUpstreams(config.namedUpstreams);
  if (!opts.create && !(await databaseExists(config))) {
    const where = config.databaseUrl ? 'in that PostgreSQL database' : `in ${config.dataDir}`;
    process.stderr.write(
      `keyrelay: no keyrelay database ${where}. Check --data-dir / --database-url ` +
        `(KEYRELAY_DATA_DIR / KEYRELAY_DATABASE_URL), or create one with "keyrelay migrate".\n`,
    );
    return EXIT.failed;
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
    await fn({ configStore, logStore, bus, counters: redis ? createRedisCounters(redis.client) : null });
    return EXIT.ok;
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    process.stderr.write(`keyrelay: ${inFlagTerms(message)}\n`);
    return exitStatus(err);
  } finally {
    await bus.close();
    await redis?.close();
    await logStore.close();
    await configStore.close();
  }
}

/** Everything on standard input, up to its end (a pipe, a file, or what is typed before Ctrl-D). */
/** An audit entry for a change made from the CLI: no actor, address or user agent (the operator's shell). */
async function cliAudit(
  store: ConfigStore,
  orgId: string,
  action: string,
  target: string,
  change: { before: Record<string, unknown>; after: Record<string, unknown> },
): Promise<void> {
  await store.appendAudit({
    id: newId(),
    org_id: orgId,
    at: new Date().toISOString(),
    actor_id: null,
    actor_email: null,
    action,
    target,
    ip: null,
    user_agent: null,
    ...change,
  });
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
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

async function orgIdOf(store: ConfigStore, org: string | undefined): Promise<string> {
  const id = need(org, '--org');
  if (!(await store.getOrg(id))) throw domainError('org_not_found');
  return id;
}

const print = (args: CommandArgs, json: unknown, text: string) =>
  process.stdout.write(args.json ? JSON.stringify(json, null, 2) + '\n' : text + '\n');

const keyLine = (k: KeyView) =>
  `${k.id}  ${k.name.padEnd(16)} ${k.hint}  ${k.status.padEnd(7)}  ${k.service ? 'service  ' : ''}created ${k.created_at}  last used ${k.last_used_at ?? 'never'}`;

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

/** The limit flags a member's limits take (`members limits`). */
const MEMBER_LIMIT_FLAGS = ['rpm', 'budget-usd', 'budget-period', 'budget-mode'] as const;

const limitsLine = (k: KeyLimits) =>
  [
    `providers ${k.allowed_providers?.join(',') ?? 'any'}`,
    `models ${k.allowed_models?.join(',') ?? 'any'}`,
    `rpm ${k.rate_limit_rpm === null ? 'unlimited' : `${k.rate_limit_rpm} (${k.rate_limit_scope})`}`,
    `tpm ${k.rate_limit_tpm ?? 'unlimited'}`,
    `in-flight ${k.max_concurrent ?? 'unlimited'}`,
    `budget ${k.budget_usd === null ? 'unlimited' : `$${k.budget_usd}/${k.budget_period} ${k.budget_mode}${k.budget_mode === 'hard' ? ` (unpriced: ${k.budget_unpriced})` : ''}`}`,
    ...(k.user_rate_limit_rpm === null && k.user_budget_usd === null
      ? []
      : [
          `per end user: rpm ${k.user_rate_limit_rpm ?? 'unlimited'}, budget ${k.user_budget_usd === null ? 'unlimited' : `$${k.user_budget_usd}/${k.user_budget_period} ${k.user_budget_mode}`}`,
        ]),
  ].join('  ');

const budgetLine = (b: KeyBudgetStatus, now: Date) =>
  `spent $${Number(b.spent_usd.toPrecision(3))} of $${b.budget_usd} (${Math.floor((100 * b.spent_usd) / b.budget_usd)}%), ` +
  `resets in ${waitInWords((Date.parse(b.resets_at) - now.getTime()) / 1000)} (${b.resets_at})`;

const headroomLine = (unit: string, r: RateHeadroom, now: Date) => {
  const left = Math.max(0, r.limit - r.used);
  const when = r.frees_at
    ? `full, one more in ${waitInWords((Date.parse(r.frees_at) - now.getTime()) / 1000)}`
    : r.clears_at
      ? `${left} left, all free in ${waitInWords((Date.parse(r.clears_at) - now.getTime()) / 1000)}`
      : `${left} left`;
  return `${unit} ${r.used} of ${r.limit} used in the last minute (${when})`;
};

/** The rate lines of `keys list`: what every instance counted (Redis), or where the counts are without it. */
function rateLines(status: KeyRateStatus | null, shared: boolean, now: Date): string[] {
  if (!shared)
    return ["  rate    use counted in each running instance's memory: see the console's Keys page"];
  if (!status) return [];
  return [status.rpm, status.tpm].flatMap((r, i) =>
    r ? [`  rate    ${headroomLine(i === 0 ? 'rpm' : 'tpm', r, now)}`] : [],
  );
}

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
      const orgId = args.org ?? owner;
      if (!(await configStore.getOrg(orgId))) throw domainError('org_not_found');
      const role = await configStore.getRole(orgId, owner);
      if (!role) throw domainError('member_not_found');
      // As in the console: a service key is created by someone who may manage every key there.
      if (args.service && !can(role, 'manage_keys'))
        throw domainError(
          'forbidden',
          `A service key is created by an owner or admin; ${args.email} is ${role}.`,
        );
      const created = await createKey(
        { store: configStore, bus },
        {
          accountId: owner,
          orgId,
          service: args.service,
          name: args.name ?? (args.service ? 'service' : 'cli'),
          limits: limitsPatch(args.limits),
        },
      );
      print(
        args,
        { ...created.view, key: created.key },
        `key ${created.view.name} (shown once): ${created.key}`,
      );
    }),

  'keys list': (config, args) =>
    withStores(config, async ({ configStore, logStore, counters }) => {
      const now = new Date();
      if (args.org !== undefined && args.email !== undefined)
        throw new UsageError('give --email or --org, not both');
      const records =
        args.org !== undefined
          ? await configStore.listOrgKeys(await orgIdOf(configStore, args.org))
          : await configStore.listKeys(await accountId(configStore, args.email));
      const keys = await Promise.all(
        records.map(async (k) => {
          const view = toKeyView(k, now);
          const usable = view.status === 'active';
          // Without Redis the counts live in the serving instances' memory: the JSON says null, not 0.
          const rate =
            usable && counters ? await readRateStatus(k, now.getTime(), NO_LOCAL_COUNTS, counters) : null;
          return {
            ...view,
            budget_status: usable ? await readBudgetStatus(logStore, k, now) : null,
            rate_status: rate,
          };
        }),
      );
      const text = keys.map((k) => {
        const lines = [keyLine(k), `  limits  ${limitsLine(k)}`];
        if (k.budget_status) lines.push(`  budget  ${budgetLine(k.budget_status, now)}`);
        const limited = k.status === 'active' && (k.rate_limit_rpm !== null || k.rate_limit_tpm !== null);
        if (limited) lines.push(...rateLines(k.rate_status, counters !== null, now));
        if (k.status === 'active' && k.expires_at) lines.push(`  expires ${k.expires_at}`);
        return lines.join('\n');
      });
      print(args, keys, text.join('\n') || 'no keys');
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

  'orgs list': (config, args) =>
    withStores(config, async ({ configStore }) => {
      const orgs = await configStore.listOrgsOf(await accountId(configStore, args.email));
      const text = orgs.map(
        (o) => `${o.id}  ${o.role.padEnd(6)}  ${o.personal_of ? '(personal) ' : ''}${o.name}`,
      );
      print(args, orgs, text.join('\n'));
    }),

  'orgs create': (config, args) =>
    withStores(config, async ({ configStore, bus }) => {
      const owner = await accountId(configStore, args.email);
      const org = await createOrg({ store: configStore, bus }, owner, need(args.name, '--name'));
      print(args, org, `created ${org.name}: ${org.id}`);
    }),

  'orgs audit-retention': (config, args) =>
    withStores(config, async ({ configStore }) => {
      const orgId = await orgIdOf(configStore, args.org);
      if (args.days !== undefined) {
        const days = args.days === 'off' ? null : Number(args.days);
        if (days !== null && !(Number.isInteger(days) && days >= 1 && days <= MAX_AUDIT_RETENTION_DAYS))
          throw new UsageError(
            `--days must be off or a whole number 1–${MAX_AUDIT_RETENTION_DAYS} (got ${args.days})`,
          );
        await configStore.setAuditRetention(orgId, days);
      }
      const days = await configStore.getAuditRetention(orgId);
      print(
        args,
        { org_id: orgId, audit_retention_days: days },
        `${orgId} keeps audit entries ${days === null ? 'until dropped by hand' : `for ${days} days`}`,
      );
    }),

  'members list': (config, args) =>
    withStores(config, async ({ configStore }) => {
      const orgId = await orgIdOf(configStore, args.org);
      const members = await configStore.listMembers(orgId);
      print(args, members, members.map((m) => `${m.account_id}  ${m.role.padEnd(6)}  ${m.email}`).join('\n'));
    }),

  'members add': (config, args) =>
    withStores(config, async ({ configStore }) => {
      const orgId = await orgIdOf(configStore, args.org);
      const member = await accountId(configStore, args.email);
      const role = need(args.role, '--role');
      if (!(ORG_ROLES as readonly string[]).includes(role))
        throw new UsageError(`--role must be one of ${ORG_ROLES.join(', ')} (got ${role})`);
      const before = await configStore.getRole(orgId, member);
      if (before === 'owner' && role !== 'owner') {
        const owners = (await configStore.listMembers(orgId)).filter((m) => m.role === 'owner');
        if (owners.length <= 1) throw domainError('last_owner');
      }
      await configStore.setMember(orgId, member, role as OrgRole);
      print(args, { org_id: orgId, account_id: member, role }, `${args.email} is ${role} of ${orgId}`);
    }),

  'members limits': (config, args) =>
    withStores(config, async ({ configStore, logStore, bus }) => {
      const orgId = await orgIdOf(configStore, args.org);
      const member = await accountId(configStore, args.email);
      const flags = Object.keys(args.limits).filter(
        (f) => !(MEMBER_LIMIT_FLAGS as readonly string[]).includes(f),
      );
      if (flags.length > 0)
        throw new UsageError(
          `a member's limits are ${MEMBER_LIMIT_FLAGS.map((f) => `--${f}`).join(', ')} (got --${flags[0]})`,
        );
      const patch = limitsPatch(args.limits) as Partial<MemberLimits>;
      let limits = await configStore.getMemberLimits(orgId, member);
      if (!limits) throw domainError('member_not_found');
      if (Object.keys(patch).length > 0) {
        // The operator acts as an owner would; the change is audited with no actor (the CLI's).
        const done = await setMemberLimits(
          { store: configStore, bus },
          { accountId: '', orgId, role: 'owner' },
          member,
          patch,
        );
        await cliAudit(configStore, orgId, 'member.limits', member, {
          before: { email: done.member.email, ...done.before },
          after: { email: done.member.email, ...done.after },
        });
        limits = done.after;
      }
      const now = new Date();
      const budget = await readMemberBudgetStatus(
        memberSpendSince(configStore, logStore),
        orgId,
        member,
        limits,
        now,
      );
      const text = [
        `${args.email} in ${orgId}, across their keys: rpm ${limits.rate_limit_rpm ?? 'unlimited'}, budget ${
          limits.budget_usd === null
            ? 'none'
            : `$${limits.budget_usd}/${limits.budget_period} (${limits.budget_mode})`
        }`,
      ];
      if (budget) text.push(`  budget  ${budgetLine(budget, now)}`);
      print(args, { org_id: orgId, account_id: member, limits, budget }, text.join('\n'));
    }),

  'members remove': (config, args) =>
    withStores(config, async ({ configStore, bus }) => {
      const orgId = await orgIdOf(configStore, args.org);
      const member = await accountId(configStore, args.email);
      // The operator acts as an owner would.
      const done = await removeMember(
        { store: configStore, bus },
        { accountId: '', orgId, role: 'owner' },
        member,
      );
      print(args, done, `removed ${args.email} from ${orgId}; revoked ${done.revoked.length} key(s)`);
    }),

  'requests list': (config, args) =>
    withStores(config, async ({ configStore, logStore }) => {
      const limit = parseLimit(args.limit, 20, 10_000);
      const filtered = Object.keys(args.filters).length > 0;
      if (filtered && !args.email)
        throw new UsageError('filters need --email: the account whose rows to filter');
      const owner = args.email ? await accountId(configStore, args.email) : undefined;
      const rows =
        owner && filtered
          ? (await logStore.listRequests(requestFilter(owner, args.filters), { limit })).items
          : await logStore.listRecent({ limit, ...(owner ? { account_id: owner } : {}) });
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

  'settings get': (config, args) =>
    withStores(config, async ({ configStore }) => {
      const setting = cliSetting(args.positionals[0]!);
      const value = (await configStore.getSetting(setting.name)) ?? setting.fallback;
      print(args, { name: setting.name, value }, `${setting.name} ${value}`);
    }),

  'settings set': (config, args) =>
    withStores(config, async ({ configStore }) => {
      const setting = cliSetting(args.positionals[0]!);
      const value = args.positionals[1]!;
      if (!setting.values.includes(value))
        throw new UsageError(`${setting.name} must be one of ${setting.values.join(', ')} (got ${value})`);
      await configStore.setSetting(setting.name, value);
      print(args, { name: setting.name, value }, `${setting.name} ${value}`);
    }),

  'alerts list': (config, args) =>
    withStores(config, async ({ configStore }) => {
      const orgId = await orgIdOf(configStore, args.org);
      const rules = await configStore.listAlertRules(orgId);
      const deliveries = await configStore.listAlertDeliveries(orgId, parseLimit(args.limit, 20, 500));
      const text = [
        ...rules.map(
          (r) =>
            `${r.id}  ${r.enabled ? 'on ' : 'off'}  ${r.kind.padEnd(11)} ${r.scope}${r.scope_id ? `:${r.scope_id}` : ''}  ${r.name}  -> ${r.url} (${r.format})`,
        ),
        ...deliveries.map(
          (d) =>
            `${d.created_at}  ${d.state.padEnd(9)} attempts=${d.attempts} status=${d.response_status ?? '-'}  ${d.dedupe_key}${d.error ? `  ${d.error}` : ''}`,
        ),
      ];
      // Secrets stay out of the CLI's output: it lands in shell scrollback and logs.
      const json = { rules: rules.map(({ secret: _secret, ...r }) => r), deliveries };
      print(args, json, text.join('\n') || 'no alert rules');
    }),

  prices: (config, args) =>
    withStores(config, async ({ logStore }) => {
      const to = args.to === undefined ? new Date() : parseTime(args.to, '--to');
      const from =
        args.from === undefined
          ? new Date(to.getTime() - PRICES_DEFAULT_DAYS * DAY_MS)
          : parseTime(args.from, '--from');
      if (from >= to) throw new UsageError('--from must be before --to');
      // Loaded here only: the price data is not needed by the other commands.
      const { formatPricingGaps, summarizePricingGaps } = await import('../metering/index.js');
      const gaps = summarizePricingGaps(
        from.toISOString(),
        to.toISOString(),
        await logStore.pricingGaps(from.toISOString(), to.toISOString()),
      );
      print(args, gaps, formatPricingGaps(gaps));
    }),

  reconcile: (config, args) =>
    withStores(config, async ({ logStore, configStore }) => {
      // Loaded here only: the other commands never call the providers' admin APIs.
      const { ADMIN_KEY_VARIABLES, defaultDay, formatReconciliation, parseDay, reconcileDay } =
        await import('../reconcile/index.js');
      if (config.adminKeys.configured.length === 0)
        throw new Error(
          `no admin key to read a provider's bill: set ${Object.values(ADMIN_KEY_VARIABLES).join(' and/or ')}`,
        );
      const day = args.day === undefined ? defaultDay() : parseDay(args.day);
      if (day === null) throw new UsageError('--day must be a date (2026-11-01, UTC) that has begun');
      const result = await reconcileDay(config, { logStore, configStore }, day);
      print(args, result, formatReconciliation(result));
      const failed = result.providers.flatMap((p) =>
        [p.error, p.usage_error].filter((e): e is string => e !== null).map((e) => `${p.provider}: ${e}`),
      );
      if (failed.length > 0) throw new Error(failed.join('\nkeyrelay: '));
    }),

  'reconcile-link': (config, args) =>
    withStores(config, async ({ configStore }) => {
      const [provider, apiKeyId] = args.positionals as [string, string];
      if (provider !== 'openai' && provider !== 'anthropic')
        throw new UsageError(`the provider must be openai or anthropic (got ${provider})`);
      if (!/^[0-9A-Za-z_-]{1,128}$/.test(apiKeyId))
        throw new UsageError(`"${apiKeyId}" is not a provider API key id (key_…, apikey_…)`);
      let fingerprint: string | null;
      if (args.fingerprint === 'none') fingerprint = null;
      else if (args.fingerprint !== undefined) {
        // A fingerprint only: anything else (a credential pasted by mistake) must never be stored.
        if (!/^[0-9a-f]{32}$/.test(args.fingerprint))
          throw new UsageError('--fingerprint must be a credential fingerprint (32 hex digits), or "none"');
        fingerprint = args.fingerprint;
      } else {
        // The credential itself, from standard input: hashed here and forgotten, never stored or printed.
        const credential = (await readStdin()).trim();
        if (credential === '')
          throw new UsageError('give the credential on standard input, or --fingerprint (see --help)');
        const secret = await configStore.ensureSecret(FINGERPRINT_SECRET, randomBytes(32).toString('base64'));
        fingerprint = credentialFingerprint(Buffer.from(secret, 'base64'), credential);
      }
      const { relinkProviderKey } = await import('../reconcile/index.js');
      const before = await relinkProviderKey(configStore, provider, apiKeyId, fingerprint);
      // Audited as the console audits it, in the install owner's organization, with no actor (the CLI's).
      const owner = await installOwnerId(configStore);
      if (owner !== null)
        await cliAudit(configStore, owner, 'reconcile.link', `${provider}:${apiKeyId}`, {
          before: { fingerprint: before },
          after: { fingerprint },
        });
      print(
        args,
        { provider, api_key_id: apiKeyId, fingerprint },
        fingerprint === null
          ? `${provider} ${apiKeyId}: unlinked`
          : `${provider} ${apiKeyId}: linked to credential ${fingerprint}`,
      );
    }),

  'requests export': (config, args) =>
    withStores(config, async ({ configStore, logStore }) => {
      const format = EXPORT_FORMATS.find((f): f is ExportFormat => f === args.format);
      if (!format) throw new UsageError(`--format must be csv or ndjson (got ${args.format ?? 'nothing'})`);
      if (args.json) throw new UsageError('--json does not apply: --format names the output');
      const limit = args.limit === undefined ? undefined : parseLimit(args.limit, 1, 1_000_000_000);
      const filter = requestFilter(await accountId(configStore, args.email), args.filters);
      for await (const text of exportText(logStore, filter, format, limit)) await writeOut(text);
    }),
};

/** Instance settings the CLI may change: each with its values and what applies when never set. */
const CLI_SETTINGS = [{ name: ALLOW_PRIVATE_SETTING, values: ['true', 'false'], fallback: 'false' }];

function cliSetting(name: string): (typeof CLI_SETTINGS)[number] {
  const s = CLI_SETTINGS.find((x) => x.name === name);
  if (!s)
    throw new UsageError(`unknown setting ${name} (known: ${CLI_SETTINGS.map((x) => x.name).join(', ')})`);
  return s;
}

/** `keyrelay prices` without --from: the last month, long enough to see a model used now and then. */
const PRICES_DEFAULT_DAYS = 30;
const DAY_MS = 86_400_000;

function parseTime(value: string, flag: string): Date {
  const d = new Date(/^\d{4}-\d{2}-\d{2}$/.test(value) ? `${value}T00:00:00.000Z` : value);
  if (Number.isNaN(d.getTime())) throw new UsageError(`${flag} must be a date (2026-11-01) or an ISO time`);
  return d;
}
