import { describe, expect, it } from 'vitest';
import { readClaudeCodeUserId } from './claude-code.js';

const session = '5d1c4e8a-3b9f-4c1d-8e2a-7f6b5a4c3d21';
const account = '9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d';
const device = 'ab'.repeat(32);

describe('readClaudeCodeUserId', () => {
  it('reads the JSON shape (v2.1.78 and later)', () => {
    const v = JSON.stringify({ device_id: device, account_uuid: account, session_id: session });
    expect(readClaudeCodeUserId(v)).toEqual({ user: account, session });
    const anon = JSON.stringify({ device_id: device, account_uuid: '', session_id: session });
    expect(readClaudeCodeUserId(anon)).toEqual({ user: device, session });
  });

  it('reads the older string shape, with or without an account', () => {
    expect(readClaudeCodeUserId(`user_${device}_account_${account}_session_${session}`)).toEqual({
      user: account,
      session,
    });
    expect(readClaudeCodeUserId(`user_${device}_account__session_${session}`)).toEqual({
      user: device,
      session,
    });
  });

  it('is null for any other value, JSON or not', () => {
    for (const v of [
      'customer-1',
      '{"id":"x"}',
      '{not json',
      '[1]',
      `${'x'.repeat(600)}`,
      'user_zz_account__session_',
    ])
      expect(readClaudeCodeUserId(v)).toBeNull();
  });
});
