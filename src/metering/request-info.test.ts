import { describe, expect, it } from 'vitest';
import { parseRequestInfo } from './index.js';

const body = (v: unknown) => Buffer.from(JSON.stringify(v));

describe('parseRequestInfo', () => {
  it('reads model, stream and the OpenAI end user (user, else safety_identifier)', () => {
    const info = parseRequestInfo(
      'openai',
      '/v1/chat/completions',
      body({ model: 'gpt-4o', stream: true, user: 'u1' }),
      'application/json',
    );
    expect(info).toMatchObject({
      provider: 'openai',
      path: '/v1/chat/completions',
      model: 'gpt-4o',
      stream: true,
      end_user: 'u1',
    });
    const safety = parseRequestInfo(
      'openai',
      '/v1/responses',
      body({ model: 'o3', safety_identifier: 's1' }),
      'application/json; charset=utf-8',
    );
    expect(safety).toMatchObject({ model: 'o3', stream: false, end_user: 's1' });
  });

  it('reads the Anthropic end user from metadata.user_id', () => {
    const info = parseRequestInfo(
      'anthropic',
      '/v1/messages',
      body({ model: 'claude-sonnet-4-0', metadata: { user_id: 'abc' }, user: 'ignored' }),
      'application/json',
    );
    expect(info).toMatchObject({ model: 'claude-sonnet-4-0', end_user: 'abc' });
  });

  it('reads a JSON object body sent under a non-JSON content type, so model rules cannot be side-stepped', () => {
    const raw = body({ model: 'gpt-4o', stream: true });
    for (const type of [undefined, 'text/plain', 'application/x-www-form-urlencoded']) {
      expect(parseRequestInfo('openai', '/v1/chat/completions', raw, type)).toMatchObject({
        model: 'gpt-4o',
        stream: true,
      });
    }
    const form = parseRequestInfo(
      'openai',
      '/v1/chat/completions',
      Buffer.from('model=x'),
      'application/x-www-form-urlencoded',
    );
    expect(form).toMatchObject({ model: null, json: null });
  });

  it('learns nothing, without throwing, from bad JSON, non-JSON types, empty bodies or odd shapes', () => {
    const empty = { model: null, stream: false, end_user: null, json: null };
    expect(
      parseRequestInfo('openai', '/v1/chat/completions', Buffer.from('{"model":'), 'application/json'),
    ).toMatchObject(empty);
    expect(
      parseRequestInfo(
        'openai',
        '/v1/audio/transcriptions',
        body({ model: 'x' }),
        'multipart/form-data; boundary=x',
      ),
    ).toMatchObject(empty);
    expect(parseRequestInfo('openai', '/v1/models', Buffer.alloc(0), undefined)).toMatchObject(empty);
    expect(parseRequestInfo('anthropic', '/v1/messages', body([1, 2]), 'application/json')).toMatchObject({
      ...empty,
      json: [1, 2],
    });
    expect(
      parseRequestInfo(
        'openai',
        '/v1/chat/completions',
        body({ model: 7, stream: 'yes', user: {} }),
        'application/json',
      ),
    ).toMatchObject({ model: null, stream: false, end_user: null });
  });
});
