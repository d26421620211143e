/**
 * Sessions and end users in the console: a log seeded through the proxy with the official SDKs (keyrelay's
 * own session header, Helicone's, Claude Code's and Codex's), then every number of the session list, a
 * session's timeline, an end user's page and the usage charts split by end user, checked against sums this
 * test computes from the logged rows. Real Chromium, real SQLite, the fake upstreams.
 */
import { copyFileSync, mkdirSync } from 'node:fs';
import { basename } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RequestSummary, SessionSummary } from '../src/store/types.js';
import { formatCompact, formatCost, formatMs, formatNumber } from '../web/src/lib/format.js';
import { formatDuration, formatOffset } from '../web/src/lib/view-range.js';
import {
  ensureConsoleBuilt,
  findChromium,
  launchBrowser,
  screenshotBothWidths,
  signedInPage,
} from './helpers/browser.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';
import { makeLogRow } from './helpers/log-rows.js';

if (!findChromium()) throw new Error('console-sessions.e2e: /usr/bin/chromium is missing');

const SHOTS = '/tmp/keyrelay-sessions-shots';
function keep(files: string[]): void {
  mkdirSync(SHOTS, { recursive: true });
  for (const f of files) copyFileSync(f, `${SHOTS}/${basename(f)}`);
}

const CLAUDE_SESSION = '5d1c4e8a-3b9f-4c1d-8e2a-7f6b5a4c3d21';
const CODEX_SESSION = '0199a213-81c0-7800-8aa1-bbab2a035a53';

interface Sums {
  requests: number;
  errors: number;
  input: number;
  output: number;
  cost: number;
  unknown: number;
}

/** What the log's sums count, computed here from the rows (as docs/console-api.md defines them). */
function sums(rows: RequestSummary[]): Sums {
  return {
    requests: rows.length,
    errors: rows.filter((r) => r.status >= 400 || r.outcome !== 'ok').length,
    input: rows.reduce((n, r) => n + (r.input_tokens ?? 0), 0),
    output: rows.reduce((n, r) => n + (r.output_tokens ?? 0), 0),
    cost: rows.reduce((n, r) => n + (r.cost_usd ?? 0), 0),
    unknown: rows.filter((r) => r.cost_usd === null && !(r.price_source ?? '').startsWith('not billed'))
      .length,
  };
}

/** A cost as the console writes it: the known sum, and how many calls have no price. */
function costText(s: Sums): string {
  if (s.unknown === s.requests) return 'unpriced';
  return `${formatCost(s.cost)}${s.unknown > 0 ? ` + ${formatNumber(s.unknown)} unpriced` : ''}`;
}

function durationOf(rows: RequestSummary[]): number {
  const start = Math.min(...rows.map((r) => Date.parse(r.created_at)));
  return Math.round(Math.max(...rows.map((r) => Date.parse(r.created_at) + r.latency_ms)) - start);
}

const distinct = (values: (string | null)[]) =>
  [...new Set(values.filter((v): v is string => v !== null))].sort();

async function statValue(page: Page, group: string, label: string): Promise<string> {
  const stat = page.getByRole('group', { name: group }).locator(`[data-stat="${label}"]`);
  return (await stat.locator('.stat-value').innerText()).trim();
}

describe('sessions and end users', () => {
  let h: Harness;
  let browser: Browser;
  let page: Page;
  let rows: RequestSummary[];
  let ids: { owner: string; member: string };
  const email = 'sessions@example.com';

  const inSession = (s: string) => rows.filter((r) => r.session === s).sort((a, b) => (a.id < b.id ? -1 : 1));

  beforeAll(async () => {
    await ensureConsoleBuilt();
    h = await startHarness();
    const user = await h.newUser(email);
    const other = await h.newUser('someone-else@example.com');
    ids = { owner: user.accountId, member: other.accountId };
    const openai = (key: string, headers: Record<string, string> = {}) =>
      new OpenAI({
        apiKey: 'sk-test-canary-openai',
        baseURL: `${h.url}/api/proxy/openai/v1`,
        maxRetries: 0,
        defaultHeaders: { 'proxy-api-key': key, ...headers },
      });
    const anthropic = (key: string, headers: Record<string, string> = {}) =>
      new Anthropic({
        apiKey: 'sk-ant-canary',
        baseURL: `${h.url}/api/proxy/anthropic`,
        maxRetries: 0,
        defaultHeaders: { 'proxy-api-key': key, ...headers },
      });
    const chat = (model: string, usage: object, headers: Record<string, string> = {}) =>
      openai(user.key, headers).chat.completions.create(
        { model, messages: [{ role: 'user', content: 'next step' }] },
        { headers: { 'x-fake-usage': JSON.stringify(usage) } },
      );
    const message = (usage: object, headers: Record<string, string>) =>
      anthropic(user.key, headers).messages.create(
        { model: 'claude-sonnet-4-6', max_tokens: 100, messages: [{ role: 'user', content: 'go on' }] },
        { headers: { 'x-fake-usage': JSON.stringify(usage) } },
      );

    // An agent run of alice's, keyrelay's own header: two models, one failed call.
    const run = { 'proxy-session': 'agent-run-1', 'proxy-user': 'alice' };
    await chat('gpt-4o', { prompt_tokens: 1200, completion_tokens: 300 }, run);
    await chat('gpt-4o-mini', { prompt_tokens: 800, completion_tokens: 90 }, run);
    await expect(
      openai(user.key, run).chat.completions.create(
        { model: 'gpt-4o', messages: [{ role: 'user', content: 'x' }] },
        { headers: { 'x-fake-status': '500' } },
      ),
    ).rejects.toThrow();
    await chat('gpt-4o', { prompt_tokens: 2500, completion_tokens: 640 }, run);
    // Bob's, through Helicone's headers, on Anthropic.
    const helicone = { 'Helicone-Session-Id': 'helicone-run', 'Helicone-User-Id': 'bob' };
    for (const n of [1, 2, 3]) await message({ input_tokens: 1000 * n, output_tokens: 150 * n }, helicone);
    // Claude Code names its own session; carol is the end user.
    const claudeCode = {
      'X-Claude-Code-Session-Id': CLAUDE_SESSION,
      'anthropic-beta': 'claude-code-20250219',
      'proxy-user': 'carol',
    };
    for (const n of [1, 2]) await message({ input_tokens: 4000 + n, output_tokens: 700 + n }, claudeCode);
    // Codex names its conversation, on the Responses API; no end user.
    const codex = openai(user.key, {
      originator: 'codex_cli_rs',
      'User-Agent': 'codex_cli_rs/0.46.0 (Linux 6.8.0; x86_64) xterm-256color',
      session_id: CODEX_SESSION,
    });
    for (const n of [1, 2])
      await codex.responses.create(
        { model: 'gpt-5-codex', input: 'hi', stream: false, store: false },
        { headers: { 'x-fake-usage': JSON.stringify({ prompt_tokens: 3000 * n, completion_tokens: 50 }) } },
      );
    // Alice without a session, and another account's call in a session named like alice's run.
    await chat('gpt-4o-mini', { prompt_tokens: 100, completion_tokens: 10 }, { 'proxy-user': 'alice' });
    await openai(other.key, {
      'proxy-session': 'agent-run-1',
      'proxy-user': 'alice',
    }).chat.completions.create({
      model: 'gpt-4o',
      messages: [{ role: 'user', content: 'not yours' }],
    });
    await h.flushLog();
    rows = (await h.kr.services.logStore.listRequests({ account_id: user.accountId }, { limit: 200 })).items;
    expect(rows).toHaveLength(4 + 3 + 2 + 2 + 1);
    expect(distinct(rows.map((r) => r.session))).toEqual(
      [CODEX_SESSION, CLAUDE_SESSION, 'agent-run-1', 'helicone-run'].sort(),
    );
    browser = await launchBrowser();
    page = await signedInPage(browser, h.url, email, { width: 1280, height: 800 });
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await h?.close();
  });

  it('lists every session with its start, duration, calls, tokens, cost, models and end user, newest first', async () => {
    await page.goto(`${h.url}/sessions?range=24h`);
    const table = page.getByRole('table', { name: 'Sessions' });
    await table.locator('tbody tr td a').first().waitFor();
    const sessions = distinct(rows.map((r) => r.session));
    const newestFirst = sessions.sort((a, b) => (inSession(a)[0]!.id < inSession(b)[0]!.id ? 1 : -1));
    const shown = await table.locator('tbody tr').all();
    expect(shown).toHaveLength(newestFirst.length);
    for (const [i, s] of newestFirst.entries()) {
      const mine = inSession(s);
      const t = sums(mine);
      const cells = (await shown[i]!.locator('td').allInnerTexts()).map((c) => c.trim());
      expect(cells[0]).toBe(s);
      expect(cells[2]).toBe(formatDuration(durationOf(mine)));
      expect(cells[3]).toBe(
        `${formatNumber(t.requests)}${t.errors ? ` · ${formatNumber(t.errors)} failed` : ''}`,
      );
      expect(cells[4]).toBe(`${formatCompact(t.input)} / ${formatCompact(t.output)}`);
      expect(cells[5]).toBe(costText(t));
      expect(cells[6]).toBe(distinct(mine.map((r) => r.model)).join(', ') || '—');
      expect(cells[7]).toBe(distinct(mine.map((r) => r.end_user)).join(', ') || '—');
    }
    keep(await screenshotBothWidths(page, 'sessions'));

    // Filters live in the address: an end user typed in, then a provider picked.
    await page.getByLabel('End user').fill('bob');
    await page.getByLabel('End user').press('Enter');
    await page.waitForURL(/end_user=bob/);
    await expect
      .poll(() => table.locator('tbody tr td:first-child').allInnerTexts())
      .toEqual(['helicone-run']);
    await page.goto(`${h.url}/sessions?range=24h&provider=anthropic`);
    await expect
      .poll(async () => (await table.locator('tbody tr td:first-child').allInnerTexts()).sort())
      .toEqual([CLAUDE_SESSION, 'helicone-run'].sort());
  });

  it('pages the API list by keyset, and answers bad input with clear 400s and 404s', async () => {
    const api = async (path: string) => {
      const r = await page.request.get(`${h.url}/api/console${path}`);
      return { status: r.status(), body: (await r.json()) as Record<string, unknown> };
    };
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const r = await api(`/sessions?limit=1${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      const page1 = r.body as { items: SessionSummary[]; next_cursor: string | null };
      seen.push(...page1.items.map((s) => s.session));
      cursor = page1.next_cursor;
    } while (cursor && seen.length < 10);
    expect(seen).toEqual(((await api('/sessions')).body.items as SessionSummary[]).map((s) => s.session));
    expect(seen).toHaveLength(4);

    const unknown = await api('/sessions?colour=red');
    expect([unknown.status, (unknown.body.error as { code: string }).code]).toEqual([400, 'invalid_request']);
    expect((unknown.body.error as { message: string }).message).toContain('colour');
    const huge = await api('/sessions?from=2020-01-01T00:00:00Z&to=2026-01-01T00:00:00Z');
    expect([huge.status, (huge.body.error as { code: string }).code]).toEqual([400, 'range_too_large']);
    expect((huge.body.error as { message: string }).message).toContain('366 days');
    const backwards = await api('/sessions?from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z');
    expect((backwards.body.error as { code: string }).code).toBe('invalid_range');
    expect((await api('/sessions/detail?session=nobody')).status).toBe(404);
    expect((await api('/sessions/detail')).status).toBe(400);
    expect((await api('/usage/series/split?split_by=colour')).status).toBe(400);
    // The other account's call in a session of the same name is not in this one.
    const mine = (await api('/sessions/detail?session=agent-run-1')).body as { calls: RequestSummary[] };
    expect(mine.calls.map((c) => c.id)).toEqual(inSession('agent-run-1').map((r) => r.id));
  });

  it('reads a session call by call: offset, model, tokens, cost, latency, status, each a link to the request', async () => {
    await page.goto(`${h.url}/sessions?range=24h`);
    await page.getByRole('link', { name: 'agent-run-1' }).click();
    await page.waitForURL(/\/sessions\/agent-run-1$/);
    const mine = inSession('agent-run-1');
    const t = sums(mine);
    const group = 'Session totals';
    await page.getByRole('group', { name: group }).waitFor();
    expect(await statValue(page, group, 'Calls')).toBe(formatNumber(t.requests));
    expect(await statValue(page, group, 'Duration')).toBe(formatDuration(durationOf(mine)));
    expect(await statValue(page, group, 'Tokens')).toBe(formatCompact(t.input + t.output));
    expect(await statValue(page, group, 'Cost')).toBe(costText(t));
    const calls = await page.getByRole('table', { name: 'Calls in order' }).locator('tbody tr').all();
    expect(calls).toHaveLength(mine.length);
    const start = Date.parse(mine[0]!.created_at);
    for (const [i, r] of mine.entries()) {
      const cells = (await calls[i]!.locator('td').allInnerTexts()).map((c) => c.trim());
      expect(cells).toEqual([
        `#${i + 1} ${formatOffset(Date.parse(r.created_at) - start)}`,
        r.model ?? '—',
        `${formatNumber(r.input_tokens)} / ${formatNumber(r.output_tokens)}`,
        r.cost_usd === null && (r.price_source ?? '').startsWith('not billed') ? '—' : formatCost(r.cost_usd),
        formatMs(r.latency_ms),
        String(r.status),
      ]);
    }
    keep(await screenshotBothWidths(page, 'session-timeline'));
    await calls[2]!.getByRole('link').click();
    await page.waitForURL(new RegExp(`/requests/${mine[2]!.id}$`));
  });

  it("shows one end user's totals, usage over time and requests, reached from the end-user ranking", async () => {
    await page.goto(`${h.url}/usage`);
    await page.getByRole('region', { name: 'By end user' }).getByRole('link', { name: 'alice' }).click();
    await page.waitForURL(/\/end-users\/alice/);
    const alice = rows.filter((r) => r.end_user === 'alice');
    const t = sums(alice);
    const group = 'End user totals';
    await page.getByRole('group', { name: group }).waitFor();
    expect(await statValue(page, group, 'Requests')).toBe(formatNumber(t.requests));
    expect(await statValue(page, group, 'Errors')).toBe(formatNumber(t.errors));
    expect(await statValue(page, group, 'Tokens')).toBe(formatCompact(t.input + t.output));
    expect(await statValue(page, group, 'Cost')).toBe(costText(t));
    const costChart = page.getByRole('region', { name: 'Cost' });
    expect((await costChart.locator('.chart-summary').innerText()).trim()).toBe(
      [formatCost(t.cost), t.unknown ? `${t.unknown} unpriced` : ''].filter(Boolean).join(' · '),
    );
    const requestsChart = page.getByRole('region', { name: 'Requests' }).first();
    expect((await requestsChart.locator('.chart-summary').innerText()).trim()).toBe(
      `${formatCompact(t.requests)} total · ${formatCompact(t.errors)} errors`,
    );
    await expect
      .poll(() => page.locator('table.requests-table tbody tr.clickable').count())
      .toBe(alice.length);
    keep(await screenshotBothWidths(page, 'end-user'));
    await page.getByRole('link', { name: 'Sessions →' }).click();
    await page.waitForURL(/\/sessions\?.*end_user=alice/);
    await expect
      .poll(() =>
        page.getByRole('table', { name: 'Sessions' }).locator('tbody tr td:first-child').allInnerTexts(),
      )
      .toEqual(['agent-run-1']);
  });

  it("shows a member their own sessions only, and the organization's owner everyone's", async () => {
    const org = `org${Date.now()}`;
    const { configStore, logStore } = h.kr.services;
    await configStore.createOrg({ id: org, name: 'Acme', owner_id: ids.owner });
    await configStore.setMember(org, ids.member, 'member');
    const at = Date.now() - 60_000;
    await logStore.insertBatch([
      makeLogRow({ at, org_id: org, account_id: ids.owner, session: 'owner-run', end_user: 'ann' }),
      makeLogRow({ at: at + 1, org_id: org, account_id: ids.member, session: 'member-run', end_user: 'ben' }),
      makeLogRow({ at: at + 2, org_id: org, account_id: ids.member, session: 'member-run', end_user: 'ben' }),
    ]);
    const member = await signedInPage(browser, h.url, 'someone-else@example.com');
    try {
      const get = async (as: Page, path: string) => {
        const r = await as.request.get(`${h.url}/api/console${path}`, { headers: { 'x-keyrelay-org': org } });
        return { status: r.status(), body: (await r.json()) as Record<string, unknown> };
      };
      const names = async (as: Page) =>
        ((await get(as, '/sessions')).body.items as SessionSummary[]).map((x) => [x.session, x.requests]);
      expect(await names(page)).toEqual([
        ['member-run', 2],
        ['owner-run', 1],
      ]);
      expect(await names(member)).toEqual([['member-run', 2]]);
      expect((await get(member, '/sessions/detail?session=owner-run')).status).toBe(404);
      expect((await get(page, '/sessions/detail?session=member-run')).status).toBe(200);
      const split = (await get(member, '/usage/series/split?split_by=end_user')).body as {
        groups: { group: string }[];
      };
      expect(split.groups.map((g) => g.group)).toEqual(['ben']);
    } finally {
      await member.context().close();
    }
  });

  it('splits the usage charts by end user: the top groups and the rest, kept in the address', async () => {
    await page.goto(`${h.url}/usage`);
    await page.getByLabel('Split charts by').selectOption('end_user');
    await page.waitForURL(/split=end_user/);
    const region = page.getByRole('region', { name: 'Usage by end user' });
    await region.waitFor();
    const all = sums(rows);
    expect(
      (
        await region.getByRole('region', { name: 'Cost by end user' }).locator('.chart-summary').innerText()
      ).trim(),
    ).toBe(formatCost(all.cost));
    expect(
      (
        await region
          .getByRole('region', { name: 'Requests by end user' })
          .locator('.chart-summary')
          .innerText()
      ).trim(),
    ).toBe(formatNumber(all.requests));
    await page.reload();
    await region.waitFor();
    keep(await screenshotBothWidths(page, 'usage-split'));

    // The API's groups: the top two end users by cost, then the rest summed as one.
    const from = new Date(Date.now() - 86_400_000).toISOString();
    const r = await page.request.get(
      `${h.url}/api/console/usage/series/split?split_by=end_user&top=2&bucket=day&from=${encodeURIComponent(from)}`,
    );
    const body = (await r.json()) as {
      groups: { group: string; cost_usd: number }[];
      total_groups: number;
      points: { group: string | null; requests: number; cost_usd: number }[];
    };
    const byUser = new Map<string, Sums>();
    for (const u of new Set(rows.map((x) => x.end_user ?? '')))
      byUser.set(u, sums(rows.filter((x) => (x.end_user ?? '') === u)));
    const ranked = [...byUser].sort((a, b) => b[1].cost - a[1].cost);
    expect(body.total_groups).toBe(byUser.size);
    expect(body.groups.map((g) => g.group)).toEqual(ranked.slice(0, 2).map(([u]) => u));
    const pointSums = (g: string | null) =>
      body.points
        .filter((p) => p.group === g)
        .reduce((n, p) => [n[0]! + p.requests, n[1]! + p.cost_usd], [0, 0]);
    for (const [u, s] of ranked.slice(0, 2)) {
      const [requests, cost] = pointSums(u);
      expect(requests).toBe(s.requests);
      expect(cost).toBeCloseTo(s.cost, 12);
    }
    const rest = sums(rows.filter((x) => !ranked.slice(0, 2).some(([u]) => u === (x.end_user ?? ''))));
    expect(pointSums(null)[0]).toBe(rest.requests);
    expect(pointSums(null)[1]).toBeCloseTo(rest.cost, 12);
  });
});
