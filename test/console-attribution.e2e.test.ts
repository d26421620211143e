/**
 * Who spends and why, in the console: a seeded log of several end users, sessions, provider credentials and
 * properties; each usage breakdown's numbers equal the sums this test computes from the rows; a group links
 * to its requests (filters in the URL) and the export link carries them. Real Chromium, real SQLite.
 */
import { copyFileSync, mkdirSync } from 'node:fs';
import { basename } from 'node:path';
import { parse as parseCsv } from 'csv-parse/sync';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RequestLogRow } from '../src/types.js';
import { formatCompact, formatCost, formatNumber } from '../web/src/lib/format.js';
import {
  ensureConsoleBuilt,
  findChromium,
  launchBrowser,
  screenshotBothWidths,
  signedInPage,
} from './helpers/browser.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';
import { makeLogRow } from './helpers/log-rows.js';

if (!findChromium()) throw new Error('console-attribution.e2e: /usr/bin/chromium is missing');

const USERS = ['alice', 'bob', 'carol', null] as const;
const FEATURES = ['search', 'chat', 'summarise'] as const;

type Group = { requests: number; input: number; output: number; cost: number };

function sums(rows: RequestLogRow[], groupOf: (r: RequestLogRow) => string): Map<string, Group> {
  const out = new Map<string, Group>();
  for (const r of rows) {
    const g = out.get(groupOf(r)) ?? { requests: 0, input: 0, output: 0, cost: 0 };
    g.requests++;
    g.input += r.input_tokens ?? 0;
    g.output += r.output_tokens ?? 0;
    g.cost += r.cost_usd ?? 0;
    out.set(groupOf(r), g);
  }
  return out;
}

/** A table is read again until it shows what is expected: the page re-renders as each answer arrives. */
const POLL = { timeout: 10_000, interval: 100 };

/** The breakdown table as shown: label → the numbers as the page formats them. */
async function shownBreakdown(page: Page, title: string): Promise<Map<string, string[]>> {
  const table = page.getByRole('region', { name: title });
  await table.locator('tbody tr').first().waitFor();
  // One snapshot of all rows, taken once each holds its numbers: read row by row, a row the table replaced
  // as its data arrived was seen with no cells (once on Node 24).
  let rows: string[][] = [];
  for (let i = 0; i < 100; i++) {
    rows = await table
      .locator('tbody tr')
      .evaluateAll((trs) =>
        trs.map((tr) => [...(tr as HTMLTableRowElement).cells].map((c) => c.innerText.trim())),
      );
    if (rows.length > 0 && rows.every((cells) => cells.length >= 4)) break;
    await page.waitForTimeout(50);
  }
  return new Map(rows.map((cells) => [cells[0]!, cells.slice(1, 4)]));
}

function expected(groups: Map<string, Group>): Map<string, string[]> {
  return new Map(
    [...groups].map(([label, g]) => [
      label || '(none)',
      [
        formatNumber(g.requests),
        `${formatCompact(g.input)} / ${formatCompact(g.output)}`,
        formatCost(g.cost),
      ],
    ]),
  );
}

function keep(files: string[]): void {
  mkdirSync('/tmp/ins/shots', { recursive: true });
  for (const f of files) copyFileSync(f, `/tmp/ins/shots/${basename(f)}`);
}

describe('attribution views', () => {
  let h: Harness;
  let browser: Browser;
  let page: Page;
  let rows: RequestLogRow[];
  const email = 'views@example.com';

  beforeAll(async () => {
    await ensureConsoleBuilt();
    h = await startHarness();
    const account = await h.newUser(email);
    const other = await h.newUser();
    const now = Date.now();
    rows = Array.from({ length: 60 }, (_, i) =>
      makeLogRow({
        at: now - 3_600_000 + i * 30_000,
        account_id: account.accountId,
        key_id: account.keyId,
        end_user: USERS[i % USERS.length]!,
        session: `run-${i % 7}`,
        credential_fingerprint: i % 3 === 0 ? 'fp-prod-openai' : 'fp-staging-openai',
        properties: i % 5 === 0 ? {} : { feature: FEATURES[i % FEATURES.length]! },
        input_tokens: 1000 + i * 37,
        output_tokens: 200 + i * 11,
        cost_usd: 1.25 + (i % 4) * 0.5,
        // What OpenAI reports on each response: the credential's limits and what is left of them.
        response_headers: {
          'content-type': 'application/json',
          'x-ratelimit-limit-requests': '500',
          'x-ratelimit-remaining-requests': String(499 - i),
          'x-ratelimit-reset-requests': '120ms',
          'x-ratelimit-limit-tokens': '200000',
          'x-ratelimit-remaining-tokens': String(199_000 - i * 100),
          'x-ratelimit-reset-tokens': '6m0s',
        },
      }),
    );
    const noise = makeLogRow({
      at: now - 60_000,
      account_id: other.accountId,
      key_id: other.keyId,
      end_user: 'alice',
    });
    await h.kr.services.logStore.insertBatch([...rows, noise]);
    browser = await launchBrowser();
    page = await signedInPage(browser, h.url, email, { width: 1280, height: 800 });
  }, 90_000);

  afterAll(async () => {
    await browser?.close();
    await h?.close();
  });

  it('ranks end users with their requests, tokens and cost', async () => {
    await page.goto(`${h.url}/usage`);
    const shown = await shownBreakdown(page, 'By end user');
    expect(shown).toEqual(expected(sums(rows, (r) => r.end_user ?? '')));
    const order = [...shown.keys()];
    const byRequests = [...sums(rows, (r) => r.end_user ?? '')].sort((a, b) => b[1].requests - a[1].requests);
    expect(order.map((l) => shown.get(l)![0])).toEqual(byRequests.map(([, g]) => formatNumber(g.requests)));
    keep(await screenshotBothWidths(page, 'usage-by-end-user'));

    await page.getByLabel('Rank by').selectOption('cost');
    await page.waitForURL(/rank=cost/);
    const byCost = [...sums(rows, (r) => r.end_user ?? '')].sort((a, b) => b[1].cost - a[1].cost);
    await expect
      .poll(async () => [...(await shownBreakdown(page, 'By end user')).keys()])
      .toEqual(byCost.map(([g]) => g || '(none)'));
  });

  it('answers the top groups of a ranking and counts the rest', async () => {
    const from = encodeURIComponent(new Date(Date.now() - 86_400_000).toISOString());
    const r = await page.request.get(
      `${h.url}/api/console/usage/breakdown?by=session&rank=tokens&limit=2&from=${from}`,
    );
    const body = (await r.json()) as { rows: { group: string }[]; total_groups: number };
    const byTokens = [...sums(rows, (x) => x.session ?? '')].sort(
      (a, b) => b[1].input + b[1].output - (a[1].input + a[1].output),
    );
    expect(body.total_groups).toBe(7);
    expect(body.rows.map((x) => x.group)).toEqual(byTokens.slice(0, 2).map(([g]) => g));
  });

  it('breaks down by session, provider credential and a property, each kept in the URL', async () => {
    await page.getByLabel('Break down by').selectOption('session');
    await page.waitForURL(/by=session/);
    await expect
      .poll(() => shownBreakdown(page, 'By session'), POLL)
      .toEqual(expected(sums(rows, (r) => r.session ?? '')));

    await page.getByLabel('Break down by').selectOption('credential_fingerprint');
    await page.waitForURL(/by=credential_fingerprint/);
    await expect
      .poll(() => shownBreakdown(page, 'By provider credential'), POLL)
      .toEqual(expected(sums(rows, (r) => r.credential_fingerprint ?? '')));

    await page.getByLabel('Break down by').selectOption('property');
    const name = page.getByLabel('Property name');
    await name.fill('feature');
    await name.press('Enter');
    await page.waitForURL(/by=property%3Afeature/);
    await expect
      .poll(() => shownBreakdown(page, 'By feature'), POLL)
      .toEqual(expected(sums(rows, (r) => r.properties.feature ?? '')));
    // A reload shows the same view: it is all in the URL.
    await page.reload();
    await expect
      .poll(() => shownBreakdown(page, 'By feature'), POLL)
      .toEqual(expected(sums(rows, (r) => r.properties.feature ?? '')));
    keep(await screenshotBothWidths(page, 'usage-by-property'));
  });

  it("opens a session's calls from its row, and exports exactly those", async () => {
    await page.goto(`${h.url}/usage?by=session`);
    await page.getByRole('region', { name: 'By session' }).getByRole('link', { name: 'run-3' }).click();
    await page.waitForURL(/\/sessions\/run-3$/);
    await page.getByRole('link', { name: 'In the request log' }).click();
    await page.waitForURL(/\/requests\?.*session=run-3/);
    const mine = rows.filter((r) => r.session === 'run-3');
    await expect
      .poll(() => page.locator('table.requests-table tbody tr.clickable').count())
      .toBe(mine.length);
    await page.getByText('Session:').waitFor();
    keep(await screenshotBothWidths(page, 'requests-session'));

    const href = await page.getByRole('link', { name: 'Export CSV' }).getAttribute('href');
    expect(href).toContain('session=run-3');
    const csv = await page.request.get(`${h.url}${href}`);
    expect(csv.status()).toBe(200);
    const records = parseCsv<Record<string, string>>(await csv.text(), { bom: true, columns: true });
    expect(records.map((r) => r.id).sort()).toEqual(mine.map((r) => r.id).sort());

    await page.getByRole('button', { name: 'Remove the session filter' }).click();
    await page.waitForURL((u) => !u.search.includes('session='));
  });

  it('shows each provider credential with its spend, latest headroom and the label its owner gives it', async () => {
    await page.goto(`${h.url}/credentials`);
    const table = page.getByRole('table', { name: 'Provider credentials' });
    // Loaded: the rows name their fingerprints (the placeholders before them do not).
    await table.locator('tbody tr code').first().waitFor();
    const groups = sums(rows, (r) => r.credential_fingerprint ?? '');
    const shownRows = await table.locator('tbody tr').all();
    expect(shownRows).toHaveLength(groups.size);
    for (const row of shownRows) {
      const fp = await row.locator('code').getAttribute('title');
      const g = groups.get(fp!)!;
      const cells = await row.locator('td').allInnerTexts();
      expect(cells[2]!.trim()).toBe(formatNumber(g.requests));
      expect(cells[3]!.trim()).toBe(`${formatCompact(g.input)} / ${formatCompact(g.output)}`);
      expect(cells[4]!.trim()).toBe(formatCost(g.cost));
      const latest = rows.filter((r) => r.credential_fingerprint === fp).at(-1)!;
      expect(cells[5]).toContain(
        `Requests ${latest.response_headers['x-ratelimit-remaining-requests']} / 500 left`,
      );
      expect(cells[5]).toContain(
        `Tokens ${formatNumber(Number(latest.response_headers['x-ratelimit-remaining-tokens']))} / 200,000 left`,
      );
    }
    await page.getByRole('button', { name: 'Label credential fp-prod-open' }).click();
    const input = page.getByLabel('Label for credential fp-prod-open');
    await input.fill('prod OpenAI key');
    await input.press('Enter');
    await page.getByText('prod OpenAI key').waitFor();
    await page.reload();
    await page.getByText('prod OpenAI key').waitFor();
    keep(await screenshotBothWidths(page, 'credentials'));
  });

  it("opens one end user's page, with its requests, from the ranking", async () => {
    await page.goto(`${h.url}/usage`);
    await page.getByRole('region', { name: 'By end user' }).getByRole('link', { name: 'bob' }).click();
    await page.waitForURL(/\/end-users\/bob/);
    const bobs = rows.filter((r) => r.end_user === 'bob');
    await expect
      .poll(() => page.locator('table.requests-table tbody tr.clickable').count())
      .toBe(bobs.length);
  });
});
