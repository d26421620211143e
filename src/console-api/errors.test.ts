import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ApiError, DOMAIN_ERRORS, domainError, ProxyError } from '../errors.js';
import { CONSOLE_ERRORS, consoleError, fromDomainError } from './errors.js';

/** The rows of docs/console-api.md's "Errors" table, as [code, status]. */
function documentedErrors(): [string, number][] {
  const doc = readFileSync(new URL('../../docs/console-api.md', import.meta.url), 'utf8');
  const section = doc.split(/^## Errors$/m)[1]?.split(/^## /m)[0] ?? '';
  return [...section.matchAll(/^\|\s*`([a-z_]+)`\s*\|\s*(\d{3})\s*\|/gm)].map((m) => [m[1]!, Number(m[2])]);
}

describe('console error table', () => {
  it('docs/console-api.md lists exactly the codes and statuses of CONSOLE_ERRORS', () => {
    const table = Object.entries(CONSOLE_ERRORS).map(([code, e]): [string, number] => [code, e.status]);
    const documented = documentedErrors();
    expect(documented.length).toBeGreaterThan(0);
    expect(new Set(documented.map(([c]) => c)).size).toBe(documented.length);
    expect([...documented].sort()).toEqual([...table].sort());
  });

  it('throws by code, with the status from the table', () => {
    const err = consoleError('key_not_active');
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({
      status: 409,
      code: 'key_not_active',
      message: CONSOLE_ERRORS.key_not_active.message,
    });
    expect(consoleError('too_many_attempts', undefined, 7)).toMatchObject({
      status: 429,
      retryAfterSeconds: 7,
    });
  });

  it('maps the domain errors at the edge, keeping their message', () => {
    expect(fromDomainError(domainError('email_taken'))).toMatchObject({ status: 409, code: 'email_taken' });
    expect(fromDomainError(domainError('invalid_cursor', 'Invalid cursor.'))).toMatchObject({
      status: 400,
      code: 'invalid_cursor',
    });
    expect(fromDomainError(domainError('invalid_limits', 'rate_limit_rpm must be …'))).toMatchObject({
      status: 400,
      message: 'rate_limit_rpm must be …',
    });
    expect(fromDomainError(new Error('boom'))).toBeUndefined();
    // The proxy's codes are the proxy's to answer: never a console answer.
    expect(fromDomainError(new ProxyError('proxy_rate_limited'))).toBeUndefined();
  });

  it('answers every domain code with its own code', () => {
    for (const code of Object.keys(DOMAIN_ERRORS) as (keyof typeof DOMAIN_ERRORS)[])
      expect(fromDomainError(domainError(code))?.code).toBe(code);
  });
});
