/**
 * Attribution without code changes: Helicone's headers as aliases of keyrelay's own (never forwarded), and
 * the sessions Claude Code and Codex name by themselves, recorded from requests shaped as those clients send
 * them through the official SDKs.
 */
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RequestLogRow } from '../src/types.js';
import { startHarness, type Harness } from './helpers/keyrelay.js';

let h: Harness;
let user: { key: string; keyId: string; accountId: string };

beforeAll(async () => {
  h = await startHarness();
  user = await h.newUser();
});
afterAll(() => h.close());

async function row(id: string | null): Promise<RequestLogRow> {
  await h.flushLog();
  const r = await h.kr.services.logStore.getRequest(user.accountId, id ?? '');
  if (!r) throw new Error(`no log row ${id}`);
  return r;
}

const openaiWith = (headers: Record<string, string>) =>
  new OpenAI({
    apiKey: 'sk-test-canary-openai',
    baseURL: `${h.url}/api/proxy/openai/v1`,
    maxRetries: 0,
    defaultHeaders: { 'proxy-api-key': user.key, ...headers },
  });
const anthropicWith = (headers: Record<string, string>) =>
  new Anthropic({
    apiKey: 'sk-ant-canary',
    baseURL: `${h.url}/api/proxy/anthropic`,
    maxRetries: 0,
    defaultHeaders: { 'proxy-api-key': user.key, ...headers },
  });

const chat = { model: 'gpt-4o-mini', messages: [{ role: 'user' as const, content: 'hi' }] };
const msg = {
  model: 'claude-sonnet-4-6',
  max_tokens: 50,
  messages: [{ role: 'user' as const, content: 'hi' }],
};

describe("Helicone's headers", () => {
  it('record the end user, session and properties, and none reaches the provider', async () => {
    const before = h.openai.requests.length;
    const { response } = await openaiWith({
      'Helicone-User-Id': 'customer-7',
      'Helicone-Session-Id': 'run-42',
      'Helicone-Session-Path': '/plan/step-1',
      'Helicone-Property-Environment': 'prod',
      'Helicone-Property-Feature': 'search',
      'Helicone-Auth': 'Bearer sk-helicone-0123456789abcdef',
    })
      .chat.completions.create(chat)
      .withResponse();
    const logged = await row(response.headers.get('x-keyrelay-request-id'));
    expect(logged).toMatchObject({
      end_user: 'customer-7',
      session: 'run-42',
      properties: { environment: 'prod', feature: 'search' },
    });
    const sent = h.openai.requests[before]!;
    const names = Object.keys(sent.headers);
    expect(names.filter((n) => n.startsWith('helicone-'))).toEqual([]);
    expect(sent.headers.authorization).toBe('Bearer sk-test-canary-openai');
    expect(JSON.stringify(logged)).not.toContain('sk-helicone-0123456789abcdef');
  });

  it("give way to keyrelay's own headers when both are sent", async () => {
    const { response } = await openaiWith({
      'Helicone-User-Id': 'from-helicone',
      'proxy-user': 'from-keyrelay',
      'Helicone-Session-Id': 'helicone-session',
      'proxy-session': 'keyrelay-session',
      'Helicone-Property-Team': 'h',
      'proxy-property-team': 'k',
    })
      .chat.completions.create(chat)
      .withResponse();
    expect(await row(response.headers.get('x-keyrelay-request-id'))).toMatchObject({
      end_user: 'from-keyrelay',
      session: 'keyrelay-session',
      properties: { team: 'k' },
    });
  });

  it('name the session over a client’s own identifier', async () => {
    const { response } = await anthropicWith({
      'Helicone-Session-Id': 'chosen',
      'X-Claude-Code-Session-Id': '0b6f1f5e-54d6-4f7e-9a57-0d4a4c1f9e11',
    })
      .messages.create(msg)
      .withResponse();
    expect((await row(response.headers.get('x-keyrelay-request-id'))).session).toBe('chosen');
  });
});

describe('Claude Code', () => {
  const session = '5d1c4e8a-3b9f-4c1d-8e2a-7f6b5a4c3d21';
  const account = '9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d';
  const device = 'f3a1c9e7d5b3a1f9e7d5c3b1a9f7e5d3c1b9a7f5e3d1c9b7a5f3e1d9c7b5a3f1';
  /** What Claude Code sends besides the body: its user agent and beta flags, and the session header. */
  const claudeHeaders = {
    'User-Agent': 'claude-cli/2.1.90 (external, cli)',
    'anthropic-beta': 'claude-code-20250219,interleaved-thinking-2025-05-14',
    'x-app': 'cli',
    'X-Claude-Code-Session-Id': session,
  };

  it('records its session header and its account as the end user (metadata.user_id as JSON)', async () => {
    const before = h.anthropic.requests.length;
    const userId = JSON.stringify({ device_id: device, account_uuid: account, session_id: session });
    const { response } = await anthropicWith(claudeHeaders)
      .messages.create({ ...msg, metadata: { user_id: userId } })
      .withResponse();
    const logged = await row(response.headers.get('x-keyrelay-request-id'));
    expect(logged).toMatchObject({ session, end_user: account });
    // Claude Code's own header is the client's to send upstream: it crosses unchanged.
    expect(h.anthropic.requests[before]!.headers['x-claude-code-session-id']).toBe(session);
  });

  it('takes the installation as the end user when not signed in', async () => {
    const userId = JSON.stringify({ device_id: device, account_uuid: '', session_id: session });
    const { response } = await anthropicWith(claudeHeaders)
      .messages.create({ ...msg, metadata: { user_id: userId } })
      .withResponse();
    expect(await row(response.headers.get('x-keyrelay-request-id'))).toMatchObject({
      session,
      end_user: device,
    });
  });

  it('reads the session from metadata.user_id where an older version sends no header', async () => {
    const { response } = await anthropicWith({ 'User-Agent': 'claude-cli/1.0.83 (external, cli)' })
      .messages.create({
        ...msg,
        metadata: { user_id: `user_${device}_account_${account}_session_${session}` },
      })
      .withResponse();
    expect(await row(response.headers.get('x-keyrelay-request-id'))).toMatchObject({
      session,
      end_user: account,
    });
  });

  it('leaves an ordinary metadata.user_id as the end user, with no session', async () => {
    const { response } = await anthropicWith({})
      .messages.create({ ...msg, metadata: { user_id: 'customer-99' } })
      .withResponse();
    expect(await row(response.headers.get('x-keyrelay-request-id'))).toMatchObject({
      session: null,
      end_user: 'customer-99',
    });
  });
});

describe('Codex', () => {
  const conversation = '0199a213-81c0-7800-8aa1-bbab2a035a53';
  /** Codex's request headers (codex-rs): its client name, and the conversation as `session_id`. */
  const codexHeaders = {
    originator: 'codex_cli_rs',
    'User-Agent': 'codex_cli_rs/0.46.0 (Linux 6.8.0; x86_64) xterm-256color',
    session_id: conversation,
  };

  it('records its session_id header as the session on the Responses API', async () => {
    const before = h.openai.requests.length;
    const { response } = await openaiWith(codexHeaders)
      .responses.create({
        model: 'gpt-5-codex',
        input: 'hi',
        stream: false,
        store: false,
        prompt_cache_key: conversation,
      })
      .withResponse();
    expect((await row(response.headers.get('x-keyrelay-request-id'))).session).toBe(conversation);
    expect(h.openai.requests[before]!.headers.session_id).toBe(conversation);
  });

  it('records the conversation_id header older versions send alone', async () => {
    const { response } = await openaiWith({ originator: 'codex_cli_rs', conversation_id: conversation })
      .chat.completions.create(chat)
      .withResponse();
    expect((await row(response.headers.get('x-keyrelay-request-id'))).session).toBe(conversation);
  });

  it('does not take an Anthropic request’s session_id header for a session', async () => {
    const { response } = await anthropicWith({ session_id: 'not-ours' }).messages.create(msg).withResponse();
    expect((await row(response.headers.get('x-keyrelay-request-id'))).session).toBeNull();
  });
});

describe('end users named in request bodies', () => {
  const long = (c: string) => `${c.repeat(250)}-${'x'.repeat(50)}`;

  it('are cut at 256 characters as the proxy-user header is: OpenAI `user`, Anthropic `metadata.user_id`', async () => {
    const viaHeader = await openaiWith({ 'proxy-user': long('h') })
      .chat.completions.create(chat)
      .withResponse();
    const headerRow = await row(viaHeader.response.headers.get('x-keyrelay-request-id'));
    expect(headerRow.end_user).toBe(long('h').slice(0, 256));

    const viaUser = await openaiWith({})
      .chat.completions.create({ ...chat, user: long('o') })
      .withResponse();
    expect((await row(viaUser.response.headers.get('x-keyrelay-request-id'))).end_user).toBe(
      long('o').slice(0, 256),
    );
    const viaMetadata = await anthropicWith({})
      .messages.create({ ...msg, metadata: { user_id: long('a') } })
      .withResponse();
    expect((await row(viaMetadata.response.headers.get('x-keyrelay-request-id'))).end_user).toBe(
      long('a').slice(0, 256),
    );
    // The provider still gets the body as sent: only keyrelay's record is cut.
    const sent = JSON.parse(h.anthropic.requests.at(-1)!.body.toString('utf8')) as {
      metadata: { user_id: string };
    };
    expect(sent.metadata.user_id).toBe(long('a'));
  });
});
