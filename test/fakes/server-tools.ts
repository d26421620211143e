/**
 * Server-side tools as the fakes run them: each hosted tool the request declares runs `calls` times
 * (`x-fake-tool-calls`, default 1), answered in the provider's documented shapes.
 *   Anthropic: `server_tool_use` + `<tool>_tool_result` content blocks, `usage.server_tool_use`
 *     {web_search_requests, web_fetch_requests}, and the message's `container` when code ran
 *     (https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/web-search-tool,
 *      …/web-fetch-tool, …/code-execution-tool)
 *   OpenAI Responses: one output item per call: `web_search_call`, `file_search_call`,
 *     `code_interpreter_call` (all calls in one container), `image_generation_call`
 *     (https://platform.openai.com/docs/api-reference/responses/object)
 */

type Json = Record<string, unknown>;

function declared(tools: unknown): Json[] {
  return Array.isArray(tools)
    ? tools.filter((t): t is Json => typeof t === 'object' && t !== null && typeof t.type === 'string')
    : [];
}

export interface AnthropicToolRun {
  content: Json[];
  serverToolUse: { web_search_requests: number; web_fetch_requests: number };
  container: Json | null;
}

/** What Anthropic's server tools add to a message; null when the request declares none. */
export function runAnthropicServerTools(
  tools: unknown,
  calls: number,
  seed: string,
): AnthropicToolRun | null {
  const content: Json[] = [];
  const counts = { web_search_requests: 0, web_fetch_requests: 0 };
  let container: Json | null = null;
  let n = 0;
  const id = () => `srvtoolu_01${seed}${String(++n).padStart(4, '0')}`;
  for (const tool of declared(tools)) {
    const type = tool.type as string;
    for (let i = 0; i < calls; i++) {
      if (type.startsWith('web_search_')) {
        const use = id();
        content.push(
          { type: 'server_tool_use', id: use, name: 'web_search', input: { query: `fake query ${i}` } },
          {
            type: 'web_search_tool_result',
            tool_use_id: use,
            content: [
              {
                type: 'web_search_result',
                url: `https://example.com/${i}`,
                title: `Result ${i}`,
                encrypted_content: 'RmFrZSBlbmNyeXB0ZWQgY29udGVudA==',
                page_age: 'November 1, 2026',
              },
            ],
          },
        );
        counts.web_search_requests++;
      } else if (type.startsWith('web_fetch_')) {
        const use = id();
        content.push(
          { type: 'server_tool_use', id: use, name: 'web_fetch', input: { url: `https://example.com/${i}` } },
          {
            type: 'web_fetch_tool_result',
            tool_use_id: use,
            content: {
              type: 'web_fetch_result',
              url: `https://example.com/${i}`,
              content: {
                type: 'document',
                source: { type: 'text', media_type: 'text/plain', data: 'Fetched text.' },
                title: 'Example',
              },
              retrieved_at: '2026-11-27T12:00:00Z',
            },
          },
        );
        counts.web_fetch_requests++;
      } else if (type.startsWith('code_execution_')) {
        const use = id();
        content.push(
          {
            type: 'server_tool_use',
            id: use,
            name: 'bash_code_execution',
            input: { command: `echo ${i}` },
          },
          {
            type: 'bash_code_execution_tool_result',
            tool_use_id: use,
            content: {
              type: 'bash_code_execution_result',
              stdout: `${i}\n`,
              stderr: '',
              return_code: 0,
              content: [],
            },
          },
        );
        container = { id: `container_011${seed}`, expires_at: '2026-11-27T13:00:00Z' };
      }
    }
  }
  if (content.length === 0) return null;
  return { content, serverToolUse: counts, container };
}

/** The Responses output items OpenAI's hosted tools add, before the message; [] when none is declared. */
export function runOpenAIHostedTools(tools: unknown, calls: number, seed: string): Json[] {
  const items: Json[] = [];
  let n = 0;
  const id = (prefix: string) => `${prefix}_${seed}${String(++n).padStart(4, '0')}`;
  const container = `cntr_${seed}`;
  for (const tool of declared(tools)) {
    for (let i = 0; i < calls; i++) {
      switch (tool.type) {
        case 'web_search':
        case 'web_search_preview':
          items.push({
            id: id('ws'),
            type: 'web_search_call',
            status: 'completed',
            action: { type: 'search', query: `fake query ${i}` },
          });
          break;
        case 'file_search':
          items.push({
            id: id('fs'),
            type: 'file_search_call',
            status: 'completed',
            queries: [`fake query ${i}`],
            results: null,
          });
          break;
        case 'code_interpreter':
          items.push({
            id: id('ci'),
            type: 'code_interpreter_call',
            status: 'completed',
            code: `print(${i})`,
            container_id: container,
            outputs: null,
          });
          break;
        case 'image_generation':
          items.push({
            id: id('ig'),
            type: 'image_generation_call',
            status: 'completed',
            result: 'iVBORw0KGgo=',
          });
          break;
      }
    }
  }
  return items;
}
