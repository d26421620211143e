/**
 * Quickstart snippets, filled with the server's public URL and, when the console still holds it, the full
 * key. Otherwise the snippets read the key from `$KEYRELAY_KEY` so nothing pasted ever contains a fake key.
 */

export interface Snippet {
  id: string;
  label: string;
  language: string;
  code: string;
}

export interface SnippetGroup {
  id: string;
  label: string;
  description: string;
  variants: Snippet[];
}

/**
 * The models the snippets name: the providers' undated aliases, which they move to each new snapshot, so a
 * pasted snippet keeps working without edits. test/console-snippets.e2e.test.ts runs the snippets with the
 * official SDKs and fails as soon as an SDK warns that one of these is deprecated.
 */
export const SNIPPET_MODELS = { openai: 'gpt-5-mini', anthropic: 'claude-haiku-4-5' } as const;

export function buildSnippets(publicUrl: string, key: string | null): SnippetGroup[] {
  const base = publicUrl.replace(/\/+$/, '');
  const openaiBase = `${base}/api/proxy/openai/v1`;
  const anthropicBase = `${base}/api/proxy/anthropic`;
  const shellKey = key ?? '$KEYRELAY_KEY';
  const jsKey = key ? `'${key}'` : 'process.env.KEYRELAY_KEY';
  const pyKey = key ? `"${key}"` : 'os.environ["KEYRELAY_KEY"]';
  const pyImport = key ? '' : 'import os\n';

  return [
    {
      id: 'curl',
      label: 'curl',
      description:
        'Your provider key goes where it always did; keyrelay forwards it untouched and never stores it.',
      variants: [
        {
          id: 'curl-openai',
          label: 'OpenAI',
          language: 'bash',
          code: `curl ${openaiBase}/chat/completions \\
  -H "Authorization: Bearer $OPENAI_API_KEY" \\
  -H "proxy-api-key: ${shellKey}" \\
  -H "content-type: application/json" \\
  -d '{"model": "${SNIPPET_MODELS.openai}", "messages": [{"role": "user", "content": "Hello!"}]}'`,
        },
        {
          id: 'curl-anthropic',
          label: 'Anthropic',
          language: 'bash',
          code: `curl ${anthropicBase}/v1/messages \\
  -H "x-api-key: $ANTHROPIC_API_KEY" \\
  -H "anthropic-version: 2023-06-01" \\
  -H "proxy-api-key: ${shellKey}" \\
  -H "content-type: application/json" \\
  -d '{"model": "${SNIPPET_MODELS.anthropic}", "max_tokens": 256, "messages": [{"role": "user", "content": "Hello!"}]}'`,
        },
      ],
    },
    {
      id: 'openai-sdk',
      label: 'OpenAI SDK',
      description: 'Point the official SDK at keyrelay and add one header. OPENAI_API_KEY is read as usual.',
      variants: [
        {
          id: 'openai-node',
          label: 'Node',
          language: 'ts',
          code: `import OpenAI from 'openai';

const client = new OpenAI({
  baseURL: '${openaiBase}',
  defaultHeaders: { 'proxy-api-key': ${jsKey} },
});

const completion = await client.chat.completions.create({
  model: '${SNIPPET_MODELS.openai}',
  messages: [{ role: 'user', content: 'Hello!' }],
});
console.log(completion.choices[0].message.content);`,
        },
        {
          id: 'openai-python',
          label: 'Python',
          language: 'python',
          code: `${pyImport}from openai import OpenAI

client = OpenAI(
    base_url="${openaiBase}",
    default_headers={"proxy-api-key": ${pyKey}},
)

completion = client.chat.completions.create(
    model="${SNIPPET_MODELS.openai}",
    messages=[{"role": "user", "content": "Hello!"}],
)
print(completion.choices[0].message.content)`,
        },
      ],
    },
    {
      id: 'anthropic-sdk',
      label: 'Anthropic SDK',
      description:
        'Point the official SDK at keyrelay and add one header. ANTHROPIC_API_KEY is read as usual.',
      variants: [
        {
          id: 'anthropic-node',
          label: 'Node',
          language: 'ts',
          code: `import Anthropic from '@anthropic-ai/sdk';

const client = new Anthropic({
  baseURL: '${anthropicBase}',
  defaultHeaders: { 'proxy-api-key': ${jsKey} },
});

const message = await client.messages.create({
  model: '${SNIPPET_MODELS.anthropic}',
  max_tokens: 1024,
  messages: [{ role: 'user', content: 'Hello!' }],
});
console.log(message.content);`,
        },
        {
          id: 'anthropic-python',
          label: 'Python',
          language: 'python',
          code: `${pyImport}from anthropic import Anthropic

client = Anthropic(
    base_url="${anthropicBase}",
    default_headers={"proxy-api-key": ${pyKey}},
)

message = client.messages.create(
    model="${SNIPPET_MODELS.anthropic}",
    max_tokens=1024,
    messages=[{"role": "user", "content": "Hello!"}],
)
print(message.content)`,
        },
      ],
    },
    {
      id: 'websocket',
      label: 'Realtime & WebSockets',
      description:
        'OpenAI Realtime and Responses WebSocket mode: the same base URL and header. A browser, which cannot set headers on a WebSocket, sends the key as a subprotocol instead.',
      variants: [
        {
          id: 'realtime-node',
          label: 'Realtime (Node)',
          language: 'ts',
          code: `import OpenAI from 'openai';
import { OpenAIRealtimeWS } from 'openai/realtime/ws';

// The SDK's Realtime client always dials wss://: serve keyrelay over TLS for it.
const client = new OpenAI({ baseURL: '${openaiBase.replace(/^http:/, 'https:')}' });
const rt = new OpenAIRealtimeWS(
  { model: 'gpt-realtime', options: { headers: { 'proxy-api-key': ${jsKey} } } },
  client,
);
rt.on('response.done', (e) => console.log(e.response.usage));
rt.socket.on('open', () => rt.send({ type: 'response.create' }));`,
        },
        {
          id: 'responses-ws-node',
          label: 'Responses WebSocket',
          language: 'ts',
          code: `import OpenAI from 'openai';
import { ResponsesWS } from 'openai/resources/responses/ws';

const client = new OpenAI({ baseURL: '${openaiBase}' });
const ws = new ResponsesWS(client, { headers: { 'proxy-api-key': ${jsKey} } });
ws.on('response.completed', (e) => console.log(e.response.output_text));
ws.send({ type: 'response.create', model: 'gpt-4o-mini', input: 'Hello!' });`,
        },
        {
          id: 'realtime-browser',
          label: 'Browser',
          language: 'js',
          code: `// keyrelay removes the keyrelay-key entry before forwarding; OpenAI's own entries pass untouched.
const ws = new WebSocket('${openaiBase.replace(/^http/, 'ws')}/realtime?model=gpt-realtime', [
  'realtime',
  ${key ? `'keyrelay-key.${key}'` : '`keyrelay-key.${KEYRELAY_KEY}`'},
  \`openai-insecure-api-key.\${ephemeralKey}\`,
]);`,
        },
      ],
    },
    {
      id: 'env',
      label: 'Tools & env vars',
      description: 'Tools configured through environment variables. Each wants its own form of the base URL.',
      variants: [
        {
          id: 'claude-code',
          label: 'Claude Code',
          language: 'bash',
          code: `export ANTHROPIC_BASE_URL=${anthropicBase}
export ANTHROPIC_CUSTOM_HEADERS="proxy-api-key: ${shellKey}"
claude`,
        },
        {
          id: 'openai-env',
          label: 'OPENAI_BASE_URL',
          language: 'bash',
          code: `# Tools built on the OpenAI SDKs read this; they must also send the proxy-api-key header.
export OPENAI_BASE_URL=${openaiBase}
export KEYRELAY_KEY=${key ?? '<your keyrelay key>'}`,
        },
        {
          id: 'vercel-ai',
          label: 'Vercel AI SDK',
          language: 'ts',
          code: `import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAI } from '@ai-sdk/openai';

// The AI SDK's Anthropic provider wants the base URL including /v1.
const anthropic = createAnthropic({
  baseURL: '${anthropicBase}/v1',
  headers: { 'proxy-api-key': ${jsKey} },
});

const openai = createOpenAI({
  baseURL: '${openaiBase}',
  headers: { 'proxy-api-key': ${jsKey} },
});`,
        },
      ],
    },
  ];
}
