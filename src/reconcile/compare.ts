/**
 * Sets keyrelay's logged cost and tokens for a day beside the provider's bill and usage report, per model
 * and per provider API key, and names the likely reason for each difference. A difference is always the
 * provider's number minus keyrelay's: above zero, the provider counted more than keyrelay saw or priced;
 * below zero, keyrelay counted more than the provider did.
 */
import type { LoggedCostRow, ProviderKeyLink } from '../store/types.js';
import type { BillingProvider } from './admin-keys.js';
import type { BillLine } from './cost-report.js';
import type { UsageLine } from './usage-report.js';

/** Differences up to half a cent are rounding between the provider's amounts and the price library's. */
export const AGREE_USD = 0.005;

export const TOKEN_KINDS = ['input', 'cache_read', 'cache_write', 'output'] as const;
export type TokenKind = (typeof TOKEN_KINDS)[number];

/** Token counts as both sides have them; a kind the provider's report lacks is null on its side. */
export interface TokenCounts {
  /** Calls counted; null on the provider's side where its report does not count them (Anthropic). */
  requests: number | null;
  input_tokens: number;
  cache_read_tokens: number;
  cache_write_tokens: number | null;
  output_tokens: number;
}

/** One kind of token, keyrelay's count beside the provider's. */
export interface TokenDrift {
  kind: TokenKind;
  keyrelay: number;
  provider: number;
  /** provider − keyrelay. */
  difference: number;
  /** difference ÷ provider (0.1 = keyrelay saw 10% fewer); null when the provider counted none. */
  drift: number | null;
}

export interface ModelDrift {
  /** The model as keyrelay's rows name it, else as the bill does; null: bill lines tied to no model. */
  model: string | null;
  keyrelay: {
    requests: number;
    input_tokens: number;
    cache_read_tokens: number;
    cache_write_tokens: number;
    output_tokens: number;
    cost_usd: number;
    unpriced_requests: number;
    partial_requests: number;
  };
  /**
   * What the provider billed for the model, the line items it is made of, and the tokens its usage report
   * counted (null when the usage report was not read).
   */
  provider: { cost_usd: number; items: Array<{ item: string; cost_usd: number }>; usage: TokenCounts | null };
  /** provider.cost_usd − keyrelay.cost_usd. */
  difference_usd: number;
  /** Each token kind both sides count; empty when the usage report was not read. */
  tokens: TokenDrift[];
  /** Cost within AGREE_USD (and nothing unpriced), and every token count equal where both were read. */
  agrees: boolean;
  reasons: string[];
}

/**
 * One of the provider's API key ids in its usage report, beside the credential the operator tied it to
 * (by fingerprint): a key with no link is usage keyrelay cannot account for.
 */
export interface KeyDrift {
  api_key_id: string | null;
  /** The linked credential's fingerprint; null: not linked. */
  fingerprint: string | null;
  models: string[];
  provider: TokenCounts;
  /** The linked credential's rows that day (zeros when it made none); null when not linked. */
  keyrelay: TokenCounts | null;
  tokens: TokenDrift[];
  /** Null for a key that is not linked: there is nothing to compare. */
  agrees: boolean | null;
  reasons: string[];
}

/** A credential keyrelay saw that day that no provider key id is tied to. */
export interface UnlinkedCredential {
  fingerprint: string;
  requests: number;
  input_tokens: number;
  output_tokens: number;
}

export interface ProviderReconciliation {
  provider: BillingProvider;
  /** Null when the cost report was read; else why it was not (the rest of the answer still stands). */
  error: string | null;
  /** Null when the usage (token) report was read; else why it was not. */
  usage_error: string | null;
  keyrelay_cost_usd: number;
  provider_cost_usd: number | null;
  difference_usd: number | null;
  /** The day's tokens by kind, summed over models; empty when the usage report was not read. */
  tokens: TokenDrift[];
  /**
   * Cost and, where the usage report was read, tokens agree, per model and in total; null when the cost
   * report was not read.
   */
  agrees: boolean | null;
  models: ModelDrift[];
  /** Per provider API key id (usage report), most tokens first; empty when the usage report was not read. */
  keys: KeyDrift[];
  /** keyrelay's credentials of the day with no provider key id tied to them (none when nothing is read). */
  unlinked_credentials: UnlinkedCredential[];
}

/** Dated snapshots bill under their date ("gpt-4o-mini-2024-07-18", "claude-sonnet-4-20250514"). */
const DATE_SUFFIX = /-(\d{4}-\d{2}-\d{2}|\d{8})$/;
const baseName = (model: string) => model.replace(DATE_SUFFIX, '');
const round = (n: number) => Math.round(n * 1e6) / 1e6;

const zeroCounts = (withWrites: boolean, withRequests: boolean): TokenCounts => ({
  requests: withRequests ? 0 : null,
  input_tokens: 0,
  cache_read_tokens: 0,
  cache_write_tokens: withWrites ? 0 : null,
  output_tokens: 0,
});

function addUsage(to: TokenCounts, u: UsageLine): void {
  if (to.requests !== null) to.requests += u.requests ?? 0;
  to.input_tokens += u.input_tokens;
  to.cache_read_tokens += u.cache_read_tokens;
  if (to.cache_write_tokens !== null) to.cache_write_tokens += u.cache_write_tokens ?? 0;
  to.output_tokens += u.output_tokens;
}

/** The kinds both sides count, keyrelay's beside the provider's. */
export function tokenDrifts(keyrelay: TokenCounts, provider: TokenCounts): TokenDrift[] {
  const pairs: Array<[TokenKind, number, number | null]> = [
    ['input', keyrelay.input_tokens, provider.input_tokens],
    ['cache_read', keyrelay.cache_read_tokens, provider.cache_read_tokens],
    ['cache_write', keyrelay.cache_write_tokens ?? 0, provider.cache_write_tokens],
    ['output', keyrelay.output_tokens, provider.output_tokens],
  ];
  return pairs
    .filter((p): p is [TokenKind, number, number] => p[2] !== null)
    .map(([kind, k, p]) => ({
      kind,
      keyrelay: k,
      provider: p,
      difference: p - k,
      drift: p === 0 ? null : round((p - k) / p),
    }));
}

const tokensAgree = (t: readonly TokenDrift[]) => t.every((d) => d.difference === 0);
const more = (t: readonly TokenDrift[]) => t.some((d) => d.difference > 0);
const fewer = (t: readonly TokenDrift[]) => t.some((d) => d.difference < 0);

export interface DayReports {
  /** The bill's lines; null when the cost report could not be read. */
  bill: readonly BillLine[] | null;
  /** The usage report's lines; null when it could not be read. */
  usage: readonly UsageLine[] | null;
  links: readonly ProviderKeyLink[];
  final: boolean;
}

/**
 * Joins rows, bill lines and usage lines by model: the same name, else the same name without a date
 * suffix, so rows logged under an alias ("gpt-4o-mini") meet the snapshot the provider reports
 * ("gpt-4o-mini-2024-07-18"); and usage lines with the rows of the credential their key id is linked to.
 */
export function compareDay(
  provider: BillingProvider,
  rows: readonly LoggedCostRow[],
  reports: DayReports,
): ProviderReconciliation {
  const { bill, usage, final } = reports;
  const withWrites = provider === 'anthropic';
  const withRequests = provider === 'openai';
  const links = reports.links.filter((l) => l.provider === provider);
  const linkOf = new Map(links.map((l) => [l.api_key_id, l.fingerprint]));
  const linkedFingerprints = new Set(links.map((l) => l.fingerprint));
  const drifts = new Map<string, ModelDrift>();
  const entry = (model: string | null): ModelDrift => {
    const key = model === null ? '\u0000' : baseName(model);
    let d = drifts.get(key);
    if (!d) {
      d = {
        model,
        keyrelay: {
          requests: 0,
          input_tokens: 0,
          cache_read_tokens: 0,
          cache_write_tokens: 0,
          output_tokens: 0,
          cost_usd: 0,
          unpriced_requests: 0,
          partial_requests: 0,
        },
        provider: { cost_usd: 0, items: [], usage: usage ? zeroCounts(withWrites, withRequests) : null },
        difference_usd: 0,
        tokens: [],
        agrees: true,
        reasons: [],
      };
      drifts.set(key, d);
    }
    return d;
  };
  for (const r of rows) {
    const d = entry(r.model);
    d.keyrelay.requests += r.requests;
    d.keyrelay.input_tokens += r.input_tokens;
    d.keyrelay.cache_read_tokens += r.cache_read_tokens;
    d.keyrelay.cache_write_tokens += r.cache_write_tokens;
    d.keyrelay.output_tokens += r.output_tokens;
    d.keyrelay.cost_usd += r.cost_usd;
    d.keyrelay.unpriced_requests += r.unpriced_requests;
    d.keyrelay.partial_requests += r.partial_requests;
  }
  for (const line of bill ?? []) {
    const d = entry(line.model);
    d.provider.cost_usd += line.cost_usd;
    d.provider.items.push({ item: line.item, cost_usd: round(line.cost_usd) });
  }
  // Per model: the usage under key ids that keyrelay cannot account for (no link), for the reasons.
  const unlinkedByModel = new Map<string, Map<string | null, number>>();
  for (const u of usage ?? []) {
    const d = entry(u.model);
    addUsage(d.provider.usage!, u);
    if (u.api_key_id === null || !linkOf.has(u.api_key_id)) {
      const key = u.model === null ? '\u0000' : baseName(u.model);
      const m = unlinkedByModel.get(key) ?? new Map<string | null, number>();
      m.set(u.api_key_id, (m.get(u.api_key_id) ?? 0) + u.input_tokens + u.output_tokens);
      unlinkedByModel.set(key, m);
    }
  }
  const models = [...drifts.entries()].map(([key, d]) => {
    d.keyrelay.cost_usd = round(d.keyrelay.cost_usd);
    d.provider.cost_usd = round(d.provider.cost_usd);
    d.difference_usd = bill ? round(d.provider.cost_usd - d.keyrelay.cost_usd) : 0;
    d.tokens = d.provider.usage ? tokenDrifts({ ...d.keyrelay }, d.provider.usage) : [];
    const costAgrees =
      !bill || (Math.abs(d.difference_usd) <= AGREE_USD && d.keyrelay.unpriced_requests === 0);
    d.agrees = costAgrees && tokensAgree(d.tokens);
    d.reasons = [
      ...new Set([
        ...(bill ? costReasons(d, final) : []),
        ...tokenReasons(d, unlinkedByModel.get(key), !final),
      ]),
    ];
    return d;
  });
  models.sort(
    (a, b) =>
      Math.abs(b.difference_usd) - Math.abs(a.difference_usd) ||
      tokenWeight(b.tokens) - tokenWeight(a.tokens),
  );
  const keyrelay = round(models.reduce((s, d) => s + d.keyrelay.cost_usd, 0));
  const billed = round(models.reduce((s, d) => s + d.provider.cost_usd, 0));
  const difference = round(billed - keyrelay);
  const tokens = usage ? sumTokens(models) : [];
  const { keys, unlinked } = usage
    ? compareKeys(rows, usage, linkOf, linkedFingerprints, withWrites, withRequests)
    : { keys: [], unlinked: [] };
  return {
    provider,
    error: null,
    usage_error: null,
    keyrelay_cost_usd: keyrelay,
    provider_cost_usd: bill ? billed : null,
    difference_usd: bill ? difference : null,
    tokens,
    agrees: bill
      ? models.every((d) => d.agrees) && Math.abs(difference) <= AGREE_USD && tokensAgree(tokens)
      : null,
    models,
    keys,
    unlinked_credentials: unlinked,
  };
}

const tokenWeight = (t: readonly TokenDrift[]) => t.reduce((s, d) => s + Math.abs(d.difference), 0);

function sumTokens(models: readonly ModelDrift[]): TokenDrift[] {
  const byKind = new Map<TokenKind, { k: number; p: number }>();
  for (const m of models)
    for (const t of m.tokens) {
      const s = byKind.get(t.kind) ?? { k: 0, p: 0 };
      s.k += t.keyrelay;
      s.p += t.provider;
      byKind.set(t.kind, s);
    }
  return TOKEN_KINDS.filter((k) => byKind.has(k)).map((kind) => {
    const { k, p } = byKind.get(kind)!;
    return { kind, keyrelay: k, provider: p, difference: p - k, drift: p === 0 ? null : round((p - k) / p) };
  });
}

function compareKeys(
  rows: readonly LoggedCostRow[],
  usage: readonly UsageLine[],
  linkOf: ReadonlyMap<string, string>,
  linked: ReadonlySet<string>,
  withWrites: boolean,
  withRequests: boolean,
): { keys: KeyDrift[]; unlinked: UnlinkedCredential[] } {
  const mine = new Map<string, TokenCounts>();
  for (const r of rows) {
    if (r.credential_fingerprint === null) continue;
    const c = mine.get(r.credential_fingerprint) ?? zeroCounts(true, true);
    c.requests! += r.requests;
    c.input_tokens += r.input_tokens;
    c.cache_read_tokens += r.cache_read_tokens;
    c.cache_write_tokens! += r.cache_write_tokens;
    c.output_tokens += r.output_tokens;
    mine.set(r.credential_fingerprint, c);
  }
  const theirs = new Map<string | null, { counts: TokenCounts; models: Set<string> }>();
  for (const u of usage) {
    const k = theirs.get(u.api_key_id) ?? {
      counts: zeroCounts(withWrites, withRequests),
      models: new Set<string>(),
    };
    addUsage(k.counts, u);
    if (u.model !== null) k.models.add(u.model);
    theirs.set(u.api_key_id, k);
  }
  const keys = [...theirs.entries()].map(([id, { counts, models }]): KeyDrift => {
    const fingerprint = id === null ? null : (linkOf.get(id) ?? null);
    const base = { api_key_id: id, fingerprint, models: [...models].sort(), provider: counts };
    if (fingerprint === null)
      return {
        ...base,
        keyrelay: null,
        tokens: [],
        agrees: null,
        reasons: [
          id === null
            ? "usage under no API key (the provider console's Workbench or playground): never through keyrelay"
            : 'not linked to a credential keyrelay saw: traffic that did not go through keyrelay, or a credential not linked yet',
        ],
      };
    const k = mine.get(fingerprint) ?? zeroCounts(true, true);
    const keyrelay: TokenCounts = {
      ...k,
      requests: withRequests ? k.requests : null,
      cache_write_tokens: withWrites ? k.cache_write_tokens : null,
    };
    const tokens = tokenDrifts(keyrelay, counts);
    const reasons: string[] = [];
    if (more(tokens))
      reasons.push(
        (k.requests ?? 0) === 0
          ? 'no call with this credential passed through keyrelay this day: traffic that bypassed keyrelay'
          : 'the provider counted more under this key than keyrelay logged: calls with it that did not pass through keyrelay',
      );
    if (fewer(tokens))
      reasons.push(
        'keyrelay logged more with this credential than the provider counted under the key: a wrong link, or usage keyrelay estimated',
      );
    return { ...base, keyrelay, tokens, agrees: tokensAgree(tokens), reasons };
  });
  keys.sort(
    (a, b) =>
      b.provider.input_tokens +
      b.provider.output_tokens -
      (a.provider.input_tokens + a.provider.output_tokens),
  );
  const unlinked = [...mine.entries()]
    .filter(([fp]) => !linked.has(fp))
    .map(([fingerprint, c]) => ({
      fingerprint,
      requests: c.requests ?? 0,
      input_tokens: c.input_tokens,
      output_tokens: c.output_tokens,
    }))
    .sort((a, b) => b.requests - a.requests);
  return { keys, unlinked };
}

function tokenReasons(
  d: ModelDrift,
  unlinked: ReadonlyMap<string | null, number> | undefined,
  mayNotBeFinal: boolean,
): string[] {
  if (d.tokens.length === 0 || tokensAgree(d.tokens)) return [];
  const reasons: string[] = [];
  if (more(d.tokens)) {
    const named = [...(unlinked ?? new Map<string | null, number>()).entries()].filter(([, n]) => n > 0);
    const ids = named.filter(([id]) => id !== null).map(([id]) => id!);
    if (ids.length > 0)
      reasons.push(
        `tokens under API key ${ids.join(', ')} (not linked to a credential keyrelay saw): likely traffic that did not go through keyrelay`,
      );
    if (named.some(([id]) => id === null))
      reasons.push("tokens under no API key (the provider console's Workbench or playground)");
    if (named.length === 0)
      reasons.push(
        d.keyrelay.requests === 0
          ? 'no call to this model passed through keyrelay: traffic that bypassed keyrelay'
          : 'the provider counted more tokens than keyrelay logged: calls that did not pass through keyrelay',
      );
  }
  if (fewer(d.tokens))
    reasons.push(
      "keyrelay logged more tokens than the provider counted: calls on another provider organization's credential, or usage keyrelay estimated",
    );
  if (mayNotBeFinal) reasons.push("the provider's report for this day may not be final yet");
  return reasons;
}

function costReasons(d: ModelDrift, finalReport: boolean): string[] {
  const reasons: string[] = [];
  const k = d.keyrelay;
  if (k.unpriced_requests > 0)
    reasons.push(
      `${k.unpriced_requests} unpriced call(s): keyrelay has no price for them, so their cost is missing here (see "keyrelay prices")`,
    );
  if (k.partial_requests > 0)
    reasons.push(
      `${k.partial_requests} partial call(s): a fee without a price is left out of keyrelay's cost`,
    );
  if (Math.abs(d.difference_usd) <= AGREE_USD) return reasons;
  if (d.model === null) {
    reasons.push(
      'billed items tied to no model (tools, storage, other products): keyrelay logs calls by model',
    );
  } else if (d.difference_usd > 0) {
    if (k.requests === 0)
      reasons.push('no call to this model passed through keyrelay: traffic that bypassed keyrelay');
    else
      reasons.push(
        'billed more than keyrelay logged: calls that did not pass through keyrelay, or a rate the price library does not know (priority, regional)',
      );
  } else if (d.provider.cost_usd === 0) {
    reasons.push(
      "nothing billed for calls keyrelay logged: they used a credential of another provider organization than the admin key's",
    );
  } else {
    reasons.push(
      "keyrelay counted more than was billed: calls on another provider organization's credential, or a discount (batch, flex) the price library does not apply",
    );
  }
  if (!finalReport) reasons.push("the provider's report for this day may not be final yet");
  return reasons;
}
