/** Layout checks for browser tests: no sideways overflow, and each row's name beside its actions. */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { SCREENSHOT_DIR } from './browser.js';

export const WIDTHS = [390, 1280, 1920] as const;

/**
 * What is wrong with the page's layout at the current width: the page or a table scrolling sideways, a
 * cell cut off by its table, or a row whose name or actions are outside the viewport. Empty when all is well.
 */
export async function checkLayout(
  page: Page,
  rowSelector: string,
  nameSelector: string,
  actionSelector: string,
): Promise<string[]> {
  return page.evaluate(
    ({ rowSelector, nameSelector, actionSelector }) => {
      const problems: string[] = [];
      const vw = document.documentElement.clientWidth;
      if (document.documentElement.scrollWidth > vw + 1) {
        // Name the widest culprit, so a failure says where to look.
        const wide = Array.from(document.querySelectorAll<HTMLElement>('body *')).find(
          (el) => el.getBoundingClientRect().right > vw + 1 && el.children.length === 0,
        );
        const culprit = wide ? `${wide.tagName.toLowerCase()}.${wide.getAttribute('class') ?? ''}` : '?';
        problems.push(
          `page is ${document.documentElement.scrollWidth - vw}px wider than the screen (${culprit})`,
        );
      }
      for (const wrap of Array.from(document.querySelectorAll<HTMLElement>('.table-wrap'))) {
        if (wrap.scrollWidth > wrap.clientWidth + 1)
          problems.push(`a table scrolls sideways by ${wrap.scrollWidth - wrap.clientWidth}px`);
      }
      const inView = (el: Element) => {
        const r = el.getBoundingClientRect();
        return r.width > 0 && r.left >= -1 && r.right <= vw + 1;
      };
      for (const row of Array.from(document.querySelectorAll(rowSelector))) {
        const name = row.querySelector(nameSelector);
        const label = (name?.textContent ?? '?').slice(0, 40);
        if (!name || !inView(name)) problems.push(`row "${label}": name not on screen`);
        for (const a of Array.from(row.querySelectorAll(actionSelector)))
          if (!inView(a)) problems.push(`row "${label}": "${a.textContent}" not on screen`);
        const wrap = row.closest('.table-wrap');
        if (wrap) {
          const box = wrap.getBoundingClientRect();
          for (const cell of Array.from(row.children)) {
            const r = cell.getBoundingClientRect();
            if (r.width > 0 && (r.right > box.right + 1 || r.left < box.left - 1))
              problems.push(`row "${label}": a cell is cut off (${cell.className})`);
            // Text clipped inside its own cell (overflow hidden without an ellipsis the user can hover).
            const el = cell as HTMLElement;
            if (el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).textOverflow !== 'ellipsis')
              problems.push(`row "${label}": cell ${el.className} clips its content`);
          }
        }
      }
      return problems;
    },
    { rowSelector, nameSelector, actionSelector },
  );
}

/** checkLayout at 390, 1280 and 1920 px: the problems found, by width (an empty object when none). */
export async function layoutAtEveryWidth(
  page: Page,
  rowSelector: string,
  nameSelector: string,
  actionSelector: string,
): Promise<Record<number, string[]>> {
  const original = page.viewportSize();
  const found: Record<number, string[]> = {};
  for (const width of WIDTHS) {
    await page.setViewportSize({ width, height: 900 });
    // Charts re-measure on a debounced ResizeObserver: let them settle (longer on a busy machine).
    let problems: string[] = [];
    for (let attempt = 0; attempt < 4; attempt++) {
      await page.waitForTimeout(500);
      problems = await checkLayout(page, rowSelector, nameSelector, actionSelector);
      if (problems.length === 0) break;
    }
    if (problems.length > 0) found[width] = [...new Set(problems)].slice(0, 8);
  }
  if (original) await page.setViewportSize(original);
  return found;
}

/** Full-page screenshots at 390, 1280 and 1920 px as `<name>-<width>.png`; restores the viewport. */
export async function shootAllWidths(page: Page, name: string): Promise<string[]> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  const original = page.viewportSize();
  const files: string[] = [];
  for (const width of WIDTHS) {
    await page.setViewportSize({ width, height: 900 });
    await page.waitForTimeout(200);
    const file = join(SCREENSHOT_DIR, `${name}-${width}.png`);
    await page.screenshot({ path: file, fullPage: true });
    files.push(file);
  }
  if (original) await page.setViewportSize(original);
  return files;
}
