import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CONSOLE_ERRORS } from './console-api/errors.js';
import {
  DOMAIN_ERRORS,
  DomainError,
  domainError,
  isDomainError,
  PROXY_ERRORS,
  ProxyError,
  renderWrongBaseUrl,
} from './errors.js';

/** The rows of one section's table in docs/errors.md, as [code, second column]. */
function documented(section: string): [string, number][] {
  const doc = readFileSync(new URL('../docs/errors.md', import.meta.url), 'utf8');
  const body = doc.split(new RegExp(`^## ${section}$`, 'm'))[1]?.split(/^## /m)[0] ?? '';
  return [...body.matchAll(/^\|\s*`([a-z_]+)`\s*\|\s*(\d+)\s*\|/gm)].map((m) => [m[1]!, Number(m[2])]);
}

describe('error tables', () => {
  it('docs/errors.md lists exactly the codes and statuses of PROXY_ERRORS', () => {
    const table = Object.entries(PROXY_ERRORS).map(([code, e]): [string, number] => [code, e.status]);
    expect(documented('Proxy').sort()).toEqual(table.sort());
  });

  it("docs/errors.md lists exactly the domain's codes, with the console API's status for each", () => {
    const table = (Object.keys(DOMAIN_ERRORS) as (keyof typeof DOMAIN_ERRORS)[]).map(
      (code): [string, number] => [code, CONSOLE_ERRORS[code].status],
    );
    expect(documented('Domain').sort()).toEqual(table.sort());
  });

  it('keeps the proxy codes out of the domain codes', () => {
    for (const code of Object.keys(DOMAIN_ERRORS)) expect(PROXY_ERRORS).not.toHaveProperty(code);
  });
});

describe('DomainError', () => {
  it("takes the table's message unless given one, and keeps details", () => {
    expect(domainError('key_not_found')).toMatchObject({ code: 'key_not_found', message: 'No such key.' });
    const err = domainError('invalid_limits', 'rate_limit_rpm must be …', { field: 'rate_limit_rpm' });
    expect(err).toBeInstanceOf(DomainError);
    expect(err).toMatchObject({ message: 'rate_limit_rpm must be …', details: { field: 'rate_limit_rpm' } });
    expect(isDomainError(err)).toBe(true);
  });

  it('is the type of the proxy refusals too, which carry their status from the proxy table', () => {
    const err = new ProxyError('proxy_rate_limited', 'Limit: 60 requests per minute.', 7);
    expect(err).toBeInstanceOf(DomainError);
    expect(err).toMatchObject({ code: 'proxy_rate_limited', status: 429, retryAfterSeconds: 7 });
    expect(isDomainError(err)).toBe(false);
  });

  it('renders wrong_base_url in the OpenAI and Anthropic shapes at once', () => {
    const body = JSON.parse(renderWrongBaseUrl(new ProxyError('wrong_base_url', 'Use …'))) as unknown;
    expect(body).toEqual({
      type: 'error',
      error: {
        type: 'invalid_request_error',
        code: 'wrong_base_url',
        param: null,
        message: `${PROXY_ERRORS.wrong_base_url.message} Use …`,
      },
    });
  });
});
