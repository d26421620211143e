import { describe, expect, it } from 'vitest';
import { buildSnippets } from './snippets.js';

const KEY = 'kr_' + 'a'.repeat(49);

function code(groups: ReturnType<typeof buildSnippets>, id: string): string {
  for (const g of groups) for (const v of g.variants) if (v.id === id) return v.code;
  throw new Error(`no snippet ${id}`);
}

describe('buildSnippets', () => {
  it("uses each tool's own base URL form", () => {
    const s = buildSnippets('https://relay.example.com/', KEY);
    expect(code(s, 'openai-node')).toContain("baseURL: 'https://relay.example.com/api/proxy/openai/v1'");
    expect(code(s, 'openai-python')).toContain('base_url="https://relay.example.com/api/proxy/openai/v1"');
    expect(code(s, 'anthropic-node')).toContain("baseURL: 'https://relay.example.com/api/proxy/anthropic'");
    expect(code(s, 'anthropic-python')).toContain('base_url="https://relay.example.com/api/proxy/anthropic"');
    expect(code(s, 'vercel-ai')).toContain("baseURL: 'https://relay.example.com/api/proxy/anthropic/v1'");
    expect(code(s, 'claude-code')).toContain(
      'ANTHROPIC_BASE_URL=https://relay.example.com/api/proxy/anthropic\n',
    );
    expect(code(s, 'claude-code')).toContain(`ANTHROPIC_CUSTOM_HEADERS="proxy-api-key: ${KEY}"`);
    expect(code(s, 'openai-env')).toContain('OPENAI_BASE_URL=https://relay.example.com/api/proxy/openai/v1');
    expect(code(s, 'curl-anthropic')).toContain('https://relay.example.com/api/proxy/anthropic/v1/messages');
  });

  it('reads the key from $KEYRELAY_KEY when the full key is not known', () => {
    const s = buildSnippets('http://127.0.0.1:8080', null);
    const all = s.flatMap((g) => g.variants.map((v) => v.code)).join('\n');
    expect(all).not.toMatch(/kr_[0-9A-Za-z]{49}/);
    expect(code(s, 'curl-openai')).toContain('proxy-api-key: $KEYRELAY_KEY');
    expect(code(s, 'openai-node')).toContain("'proxy-api-key': process.env.KEYRELAY_KEY");
    expect(code(s, 'anthropic-python')).toContain('import os\n');
  });
});

describe('WebSocket snippets', () => {
  it('use the ws:// form of the base URL and the keyrelay-key subprotocol in the browser', () => {
    const ws = buildSnippets('http://127.0.0.1:8080', null).find((g) => g.id === 'websocket')!;
    const browser = ws.variants.find((v) => v.id === 'realtime-browser')!.code;
    expect(browser).toContain("'ws://127.0.0.1:8080/api/proxy/openai/v1/realtime?model=gpt-realtime'");
    expect(browser).toContain('`keyrelay-key.${KEYRELAY_KEY}`');
    const rt = ws.variants.find((v) => v.id === 'realtime-node')!.code;
    expect(rt).toContain("'proxy-api-key': process.env.KEYRELAY_KEY");
    const filled = buildSnippets('https://kr.example.com/', 'kr_abc').find((g) => g.id === 'websocket')!;
    expect(filled.variants.find((v) => v.id === 'realtime-browser')!.code).toContain(
      "'wss://kr.example.com/api/proxy/openai/v1/realtime?model=gpt-realtime'",
    );
    expect(filled.variants.find((v) => v.id === 'realtime-browser')!.code).toContain(
      "'keyrelay-key.kr_abc',",
    );
  });
});
