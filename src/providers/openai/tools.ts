/**
 * OpenAI's server-side tools, counted from what the response says ran, as the fees they bill
 * (https://platform.openai.com/docs/pricing, "Built-in tools"):
 *   Responses output items   `web_search_call` (per call), `file_search_call` (per call),
 *                            `code_interpreter_call` (per container: its `container_id`),
 *                            `image_generation_call` (per image)
 *   Chat Completions         the search models (`gpt-4o-search-preview`, `gpt-5-search-api`…) search the
 *                            web once on every call
 */
import { isRecord, type ToolUses } from '../../usage/index.js';

const ITEM_FEES: Readonly<Record<string, string>> = {
  web_search_call: 'web_searches',
  file_search_call: 'storage_searches',
  image_generation_call: 'image_generations',
};

/**
 * Counts each output item once however often it is seen (a stream's `response.output_item.done`, then the
 * final response's `output`), by its id; code interpreter calls by their container.
 */
export class OpenAIToolCounter {
  private readonly items = new Map<string, string>();
  private readonly containers = new Set<string>();
  private anonymous: ToolUses = {};

  add(item: unknown): void {
    if (!isRecord(item) || typeof item.type !== 'string') return;
    if (item.type === 'code_interpreter_call') {
      const container = typeof item.container_id === 'string' ? item.container_id : null;
      if (container !== null) this.containers.add(container);
      else if (typeof item.id === 'string') this.containers.add(`item:${item.id}`);
      return;
    }
    const fee = ITEM_FEES[item.type];
    if (fee === undefined) return;
    if (typeof item.id === 'string') this.items.set(item.id, fee);
    else this.anonymous[fee] = (this.anonymous[fee] ?? 0) + 1;
  }

  addOutput(output: unknown): void {
    if (Array.isArray(output)) for (const item of output) this.add(item);
  }

  uses(): ToolUses | undefined {
    const uses: ToolUses = { ...this.anonymous };
    for (const fee of this.items.values()) uses[fee] = (uses[fee] ?? 0) + 1;
    if (this.containers.size > 0) uses.code_interpreter_containers = this.containers.size;
    return Object.keys(uses).length > 0 ? uses : undefined;
  }
}

/** A Responses body's tool uses (its `output` items), undefined when none ran. */
export function responsesToolUses(body: Record<string, unknown> | undefined): ToolUses | undefined {
  if (!body) return undefined;
  const counter = new OpenAIToolCounter();
  counter.addOutput(body.output);
  return counter.uses();
}

/** Chat Completions models that run a web search on every call ("Web search" in the pricing page). */
const SEARCH_MODEL = /(?:^|\/)gpt-[\w.-]*-search-(?:preview|api)\b/;

/** One web search for a completed call of a search model, undefined for any other model. */
export function chatToolUses(model: string | null): ToolUses | undefined {
  return model !== null && SEARCH_MODEL.test(model) ? { web_searches: 1 } : undefined;
}
