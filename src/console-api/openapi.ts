/**
 * The OpenAPI document of what an API token reads (GET /api/console/openapi.json): usage, requests (and
 * sessions, which are their rows grouped) and their export. Written by hand from the routes' schemas; test/api-tokens.test.ts calls every path it lists.
 */
const filters = ['key_id', 'provider', 'model', 'end_user', 'session', 'from', 'to'].map((name) => ({
  name,
  in: 'query',
  required: false,
  schema: name === 'from' || name === 'to' ? { type: 'string', format: 'date-time' } : { type: 'string' },
}));
const rowFilters = [
  ...filters,
  ...['status', 'outcome', 'property', 'q'].map((name) => ({
    name,
    in: 'query',
    required: false,
    schema: name === 'status' ? { type: 'integer' } : { type: 'string' },
    ...(name === 'property' && { description: 'name:value' }),
  })),
];
const errorResponse = {
  description: 'An error: `{"error": {"code", "message"}}` (docs/console-api.md lists the codes)',
  content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
};
const errors = { '400': errorResponse, '401': errorResponse, '403': errorResponse };
const json = (schema: object) => ({ description: 'OK', content: { 'application/json': { schema } } });

export const OPENAPI_DOCUMENT = {
  openapi: '3.1.0',
  info: {
    title: 'keyrelay read API',
    version: '1',
    description:
      'What a read-only API token (created in the console, Settings) reads: its account’s usage, request log, ' +
      'sessions and export. Send it as `Authorization: Bearer krt_…`. Tokens never write: anything else answers 403.',
  },
  servers: [{ url: '/api/console' }],
  security: [{ apiToken: [] }],
  components: {
    securitySchemes: {
      apiToken: { type: 'http', scheme: 'bearer', description: 'scopes: usage, requests, export' },
    },
    schemas: {
      Error: {
        type: 'object',
        properties: {
          error: { type: 'object', properties: { code: { type: 'string' }, message: { type: 'string' } } },
        },
      },
      RequestSummary: {
        type: 'object',
        description: 'A log row without headers or bodies (README, "Request log": field names).',
        additionalProperties: true,
      },
      SessionSummary: {
        type: 'object',
        description:
          'One session: started_at (first call), ended_at (last call end), duration_ms, the sums of UsageNumbers, ' +
          'and the distinct models and end_users of its calls.',
        additionalProperties: true,
      },
      UsageNumbers: {
        type: 'object',
        properties: Object.fromEntries(
          [
            'requests',
            'errors',
            'input_tokens',
            'output_tokens',
            'cache_read_tokens',
            'cost_usd',
            'unknown_cost_requests',
            'latency_p50_ms',
            'latency_p95_ms',
          ].map((n) => [n, { type: ['number', 'null'] }]),
        ),
      },
    },
  },
  paths: {
    '/usage/series': {
      get: {
        summary: 'Usage over time (scope: usage)',
        parameters: [
          ...filters,
          { name: 'bucket', in: 'query', schema: { type: 'string', enum: ['minute', 'hour', 'day'] } },
        ],
        responses: { '200': json({ type: 'object', properties: { points: { type: 'array' } } }), ...errors },
      },
    },
    '/usage/breakdown': {
      get: {
        summary: 'Usage grouped by a column or a property (scope: usage)',
        parameters: [
          ...filters,
          {
            name: 'by',
            in: 'query',
            schema: { type: 'string' },
            description:
              'model, key_id, provider, end_user, session, credential_fingerprint or property:<name>',
          },
          { name: 'rank', in: 'query', schema: { type: 'string', enum: ['requests', 'cost', 'tokens'] } },
          { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 500 } },
        ],
        responses: {
          '200': json({
            type: 'object',
            properties: { rows: { type: 'array' }, total_groups: { type: 'integer' } },
          }),
          ...errors,
        },
      },
    },
    '/usage/series/split': {
      get: {
        summary: 'Usage over time split by a column: its top groups and the rest as one (scope: usage)',
        parameters: [
          ...filters,
          { name: 'bucket', in: 'query', schema: { type: 'string', enum: ['minute', 'hour', 'day'] } },
          {
            name: 'split_by',
            in: 'query',
            required: true,
            schema: {
              type: 'string',
              enum: ['end_user', 'session', 'credential_fingerprint', 'model', 'key_id', 'provider'],
            },
          },
          { name: 'top', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 20 } },
          { name: 'rank', in: 'query', schema: { type: 'string', enum: ['requests', 'cost', 'tokens'] } },
        ],
        responses: {
          '200': json({
            type: 'object',
            description: "points: each bucket's sums per group; group null is every group not in `groups`",
            properties: {
              groups: { type: 'array' },
              total_groups: { type: 'integer' },
              points: { type: 'array' },
            },
          }),
          ...errors,
        },
      },
    },
    '/sessions': {
      get: {
        summary:
          'Sessions (rows sharing a session id), newest first, summed over the range (scope: requests)',
        parameters: [
          ...filters.filter((p) => p.name !== 'session'),
          { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 100 } },
          { name: 'cursor', in: 'query', schema: { type: 'string' } },
        ],
        responses: {
          '200': json({
            type: 'object',
            properties: {
              items: { type: 'array', items: { $ref: '#/components/schemas/SessionSummary' } },
              next_cursor: { type: ['string', 'null'] },
            },
          }),
          ...errors,
        },
      },
    },
    '/sessions/detail': {
      get: {
        summary: "One session's summary and its calls, oldest first (scope: requests)",
        parameters: [
          { name: 'session', in: 'query', required: true, schema: { type: 'string' } },
          { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 1000 } },
          { name: 'cursor', in: 'query', schema: { type: 'string' } },
        ],
        responses: {
          '200': json({
            type: 'object',
            properties: {
              session: { $ref: '#/components/schemas/SessionSummary' },
              calls: { type: 'array', items: { $ref: '#/components/schemas/RequestSummary' } },
              next_cursor: { type: ['string', 'null'] },
            },
          }),
          '404': errorResponse,
          ...errors,
        },
      },
    },
    '/credentials': {
      get: {
        summary: 'Provider credentials by fingerprint: spend and rate-limit headroom (scope: usage)',
        parameters: filters.filter((p) => p.name === 'from' || p.name === 'to'),
        responses: { '200': json({ type: 'object' }), ...errors },
      },
    },
    '/requests': {
      get: {
        summary: 'The request log, newest first unless sorted, a page at a time (scope: requests)',
        parameters: [
          ...rowFilters,
          { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 200 } },
          { name: 'cursor', in: 'query', schema: { type: 'string' } },
          {
            name: 'sort',
            in: 'query',
            description: 'time, cost, tokens or latency, then :asc or :desc (default time:desc)',
            schema: { type: 'string', pattern: '^(time|cost|tokens|latency):(asc|desc)$' },
          },
        ],
        responses: {
          '200': json({
            type: 'object',
            properties: {
              items: { type: 'array', items: { $ref: '#/components/schemas/RequestSummary' } },
              next_cursor: { type: ['string', 'null'] },
            },
          }),
          ...errors,
        },
      },
    },
    '/requests/{id}': {
      get: {
        summary: 'One request in full: redacted headers, bodies as logged (scope: requests)',
        parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
        responses: { '200': json({ type: 'object' }), '404': errorResponse, ...errors },
      },
    },
    '/requests/export': {
      get: {
        summary: 'The filtered log as CSV or NDJSON, streamed (scope: export)',
        parameters: [
          {
            name: 'format',
            in: 'query',
            required: true,
            schema: { type: 'string', enum: ['csv', 'ndjson'] },
          },
          ...rowFilters,
          { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1 } },
        ],
        responses: {
          '200': {
            description: 'The rows, newest first',
            content: {
              'text/csv': { schema: { type: 'string' } },
              'application/x-ndjson': { schema: { type: 'string' } },
            },
          },
          ...errors,
        },
      },
    },
  },
} as const;
