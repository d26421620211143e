/**
 * Fake provider origins that answer the organization cost reports as each provider documents them, and
 * pass every other path to a fake upstream (the proxy's calls), since keyrelay reads both at one origin:
 * - OpenAI `GET /v1/organization/costs` (start_time/end_time Unix seconds, bucket_width=1d, group_by,
 *   page; `Authorization: Bearer <admin key>`): `{object: "page", data: [{object: "bucket", start_time,
 *   end_time, results: [{object: "organization.costs.result", amount: {value, currency: "usd"}, line_item,
 *   project_id}]}], has_more, next_page}`.
 * - Anthropic `GET /v1/organizations/cost_report` (starting_at/ending_at RFC 3339, bucket_width=1d,
 *   group_by[], page; `x-api-key: <admin key>`, `anthropic-version`): `{data: [{starting_at, ending_at,
 *   results: [{currency: "USD", amount: "<cents>", workspace_id, description, cost_type, context_window,
 *   model, service_tier, token_type}]}], has_more, next_page}`.
 * And the usage (token) reports, grouped by model and api_key_id:
 * - OpenAI `GET /v1/organization/usage/completions` and `/usage/embeddings` (same query, group_by repeated):
 *   `{object: "page", data: [{object: "bucket", start_time, end_time, results: [{object:
 *   "organization.usage.completions.result", input_tokens, output_tokens, input_cached_tokens,
 *   input_audio_tokens, output_audio_tokens, num_model_requests, project_id, user_id, api_key_id, model,
 *   batch}]}], has_more, next_page}` (embeddings: `organization.usage.embeddings.result`, input_tokens,
 *   num_model_requests and the groups).
 * - Anthropic `GET /v1/organizations/usage_report/messages` (group_by[]=model&group_by[]=api_key_id):
 *   `{data: [{starting_at, ending_at, results: [{uncached_input_tokens, cache_creation:
 *   {ephemeral_1h_input_tokens, ephemeral_5m_input_tokens}, cache_read_input_tokens, output_tokens,
 *   server_tool_use: {web_search_requests}, api_key_id, workspace_id, model, service_tier,
 *   context_window}]}], has_more, next_page}`.
 * Each page holds `pageSize` results; next_page is an opaque cursor.
 */
import { createServer, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** One line of a day's bill, in dollars; the fake writes it in the provider's own form. */
export interface FakeBillLine {
  model: string | null;
  /** OpenAI: the line_item ("gpt-4o-mini-2024-07-18, input"); Anthropic: the description. */
  item: string;
  usd: number;
}

/** One line of a day's usage report, in keyrelay's terms (input counts cache reads and writes). */
export interface FakeUsageLine {
  model: string;
  api_key_id: string | null;
  /** OpenAI's report it belongs to (default completions); Anthropic has one. */
  endpoint?: 'completions' | 'embeddings';
  requests: number;
  input_tokens: number;
  cache_read_tokens?: number;
  /** Anthropic only (5-minute cache writes). */
  cache_write_tokens?: number;
  output_tokens: number;
}

export interface CostFault {
  /** Answer this status instead of the report, `times` times (default: every time). */
  status?: number;
  times?: number;
  retryAfter?: string;
  /** The error body's message (the providers' `error.message`). */
  message?: string;
  /** Never answer: the client's deadline must end it. */
  hang?: boolean;
  /** has_more stays true forever, each page pointing at the next. */
  endless?: boolean;
}

export interface FakeCostApi {
  url: string;
  /** The bill by UTC day (YYYY-MM-DD). */
  bills: Map<string, FakeBillLine[]>;
  pageSize: number;
  fault: CostFault | null;
  /** The usage (token) report by UTC day. */
  usage: Map<string, FakeUsageLine[]>;
  /** Like `fault`, for the usage report's paths. */
  usageFault: CostFault | null;
  /** Each usage-report request: its path and query, and its headers. */
  usageRequests: Array<{ url: string; headers: IncomingHttpHeaders }>;
  /** Where every other path goes. */
  forwardTo: string | null;
  /** Each cost-report request: its path and query, and its headers. */
  reportRequests: Array<{ url: string; headers: IncomingHttpHeaders }>;
  close(): Promise<void>;
}

const DAY_MS = 86_400_000;

export async function startFakeCostApi(
  provider: 'openai' | 'anthropic',
  adminKey: string,
): Promise<FakeCostApi> {
  const sockets = new Set<Socket>();
  const api: FakeCostApi = {
    url: '',
    bills: new Map(),
    pageSize: 2,
    fault: null,
    usage: new Map(),
    usageFault: null,
    usageRequests: [],
    forwardTo: null,
    reportRequests: [],
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
  const reportPath = provider === 'openai' ? '/v1/organization/costs' : '/v1/organizations/cost_report';
  const usagePaths: Record<string, 'completions' | 'embeddings'> =
    provider === 'openai'
      ? {
          '/v1/organization/usage/completions': 'completions',
          '/v1/organization/usage/embeddings': 'embeddings',
        }
      : { '/v1/organizations/usage_report/messages': 'completions' };
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://fake');
    const usageEndpoint = usagePaths[url.pathname];
    if (url.pathname !== reportPath && usageEndpoint === undefined) {
      // Everything else is the proxy's traffic: passed on to the fake upstream as is.
      const target = new URL(req.url ?? '/', api.forwardTo ?? 'http://127.0.0.1:9');
      const out = httpRequest(
        target,
        { method: req.method, headers: { ...req.headers, host: target.host } },
        (up) => {
          res.writeHead(up.statusCode ?? 502, up.headers);
          up.pipe(res);
        },
      );
      out.on('error', () => res.destroy());
      req.pipe(out);
      return;
    }
    (usageEndpoint ? api.usageRequests : api.reportRequests).push({
      url: req.url ?? '',
      headers: req.headers,
    });
    const json = (status: number, body: unknown, headers: Record<string, string> = {}) => {
      res.writeHead(status, { 'content-type': 'application/json', ...headers });
      res.end(JSON.stringify(body));
    };
    const error = (status: number, message: string, headers: Record<string, string> = {}) =>
      json(
        status,
        provider === 'openai'
          ? { error: { message, type: 'invalid_request_error', param: null, code: null } }
          : {
              type: 'error',
              error: { type: status === 401 ? 'authentication_error' : 'api_error', message },
            },
        headers,
      );
    const presented =
      provider === 'openai' ? req.headers.authorization?.replace(/^Bearer /, '') : req.headers['x-api-key'];
    if (presented !== adminKey) return error(401, 'Invalid admin key');
    if (provider === 'anthropic' && !req.headers['anthropic-version'])
      return error(400, 'anthropic-version header is required');
    const fault = usageEndpoint ? api.usageFault : api.fault;
    if (fault && fault.times !== 0) {
      if (fault.times !== undefined) fault.times--;
      if (fault.hang) return; // the socket stays open, unanswered
      if (fault.status !== undefined)
        return error(
          fault.status,
          fault.message ?? 'Server error',
          fault.retryAfter ? { 'retry-after': fault.retryAfter } : {},
        );
    }
    if (url.searchParams.get('bucket_width') !== '1d') return error(400, 'bucket_width must be 1d');
    const start =
      provider === 'openai'
        ? Number(url.searchParams.get('start_time')) * 1000
        : Date.parse(url.searchParams.get('starting_at') ?? '');
    if (!Number.isFinite(start)) return error(400, 'start time is required');
    const day = new Date(start).toISOString().slice(0, 10);
    const page = url.searchParams.get('page');
    if (usageEndpoint) {
      const groups = url.searchParams.getAll(provider === 'openai' ? 'group_by' : 'group_by[]');
      if (!groups.includes('model') || !groups.includes('api_key_id'))
        return error(400, 'expected group_by model and api_key_id');
      const all = (api.usage.get(day) ?? []).filter(
        (l) => provider === 'anthropic' || (l.endpoint ?? 'completions') === usageEndpoint,
      );
      return json(
        200,
        usagePage(provider, usageEndpoint, day, all, page, api.pageSize, fault?.endless === true),
      );
    }
    const lines = api.bills.get(day) ?? [];
    const offset =
      page === null ? 0 : Number(Buffer.from(page.replace(/^page_/, ''), 'base64url').toString());
    const slice = lines.slice(offset, offset + api.pageSize);
    const hasMore = fault?.endless === true || offset + api.pageSize < lines.length;
    const next = hasMore ? `page_${Buffer.from(String(offset + api.pageSize)).toString('base64url')}` : null;
    const dayStart = Date.parse(`${day}T00:00:00.000Z`);
    if (provider === 'openai') {
      return json(200, {
        object: 'page',
        data: [
          {
            object: 'bucket',
            start_time: dayStart / 1000,
            end_time: (dayStart + DAY_MS) / 1000,
            results: slice.map((l) => ({
              object: 'organization.costs.result',
              amount: { value: l.usd, currency: 'usd' },
              line_item: l.item,
              project_id: null,
            })),
          },
        ],
        has_more: hasMore,
        next_page: next,
      });
    }
    return json(200, {
      data: [
        {
          starting_at: new Date(dayStart).toISOString(),
          ending_at: new Date(dayStart + DAY_MS).toISOString(),
          results: slice.map((l) => ({
            currency: 'USD',
            amount: String(l.usd * 100),
            workspace_id: null,
            description: l.item,
            cost_type: l.model === null ? 'web_search' : 'tokens',
            context_window: l.model === null ? null : '0-200k',
            model: l.model,
            service_tier: l.model === null ? null : 'standard',
            token_type:
              l.model === null ? null : /output/i.test(l.item) ? 'output_tokens' : 'uncached_input_tokens',
          })),
        },
      ],
      has_more: hasMore,
      next_page: next,
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  api.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return api;
}

const offsetOf = (page: string | null) =>
  page === null ? 0 : Number(Buffer.from(page.replace(/^page_/, ''), 'base64url').toString());
const cursor = (offset: number) => `page_${Buffer.from(String(offset)).toString('base64url')}`;

function usagePage(
  provider: 'openai' | 'anthropic',
  endpoint: 'completions' | 'embeddings',
  day: string,
  lines: readonly FakeUsageLine[],
  page: string | null,
  pageSize: number,
  endless: boolean,
): unknown {
  const offset = offsetOf(page);
  const slice = lines.slice(offset, offset + pageSize);
  const hasMore = endless || offset + pageSize < lines.length;
  const next = hasMore ? cursor(offset + pageSize) : null;
  const dayStart = Date.parse(`${day}T00:00:00.000Z`);
  if (provider === 'openai')
    return {
      object: 'page',
      data: [
        {
          object: 'bucket',
          start_time: dayStart / 1000,
          end_time: (dayStart + DAY_MS) / 1000,
          results: slice.map((l) =>
            endpoint === 'embeddings'
              ? {
                  object: 'organization.usage.embeddings.result',
                  input_tokens: l.input_tokens,
                  num_model_requests: l.requests,
                  project_id: null,
                  user_id: null,
                  api_key_id: l.api_key_id,
                  model: l.model,
                }
              : {
                  object: 'organization.usage.completions.result',
                  input_tokens: l.input_tokens,
                  output_tokens: l.output_tokens,
                  input_cached_tokens: l.cache_read_tokens ?? 0,
                  input_audio_tokens: 0,
                  output_audio_tokens: 0,
                  num_model_requests: l.requests,
                  project_id: null,
                  user_id: null,
                  api_key_id: l.api_key_id,
                  model: l.model,
                  batch: null,
                },
          ),
        },
      ],
      has_more: hasMore,
      next_page: next,
    };
  return {
    data: [
      {
        starting_at: new Date(dayStart).toISOString(),
        ending_at: new Date(dayStart + DAY_MS).toISOString(),
        results: slice.map((l) => {
          const read = l.cache_read_tokens ?? 0;
          const write = l.cache_write_tokens ?? 0;
          return {
            uncached_input_tokens: l.input_tokens - read - write,
            cache_creation: { ephemeral_1h_input_tokens: 0, ephemeral_5m_input_tokens: write },
            cache_read_input_tokens: read,
            output_tokens: l.output_tokens,
            server_tool_use: { web_search_requests: 0 },
            api_key_id: l.api_key_id,
            workspace_id: null,
            model: l.model,
            service_tier: 'standard',
            context_window: '0-200k',
          };
        }),
      },
    ],
    has_more: hasMore,
    next_page: next,
  };
}
