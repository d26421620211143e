/**
 * How a row's cost was found (`price_source`), for every row: priced from the provider's usage, free,
 * not billed, or unpriced (cost null, shown as "unpriced", never as $0) with the reason.
 */
import { endpointOf, type EndpointClass, type Provider } from '../providers/index.js';
import { PRICE_SOURCE, unpriced, type Usage } from '../usage/index.js';

export interface Priced {
  cost_usd: number | null;
  price_source: string | null;
}

/** Rows whose price_source starts with this bill nothing (listings, refusals, errors): never "unpriced". */
export const NOT_BILLED = 'not billed';

/** Calls that answer about things rather than generate them: the providers bill none of them. */
const NOT_BILLED_CLASSES: ReadonlySet<EndpointClass> = new Set([
  'count_tokens',
  'models',
  'files',
  'batches',
]);

export function priceRow(
  provider: Provider,
  path: string | null,
  status: number,
  model: string | null,
  usage: Usage,
  cost: (provider: Provider, model: string | null, usage: Usage) => Priced,
): Priced {
  if (usage.source !== 'none') return cost(provider, model, usage);
  // A refused or failed call is not billed by the provider.
  if (status < 200 || status >= 300 || path === null)
    return { cost_usd: null, price_source: `${NOT_BILLED}: no successful response` };
  const endpoint = endpointOf(provider, path);
  if (endpoint.class === 'moderations')
    return { cost_usd: 0, price_source: `${PRICE_SOURCE}: moderations are free` };
  if (NOT_BILLED_CLASSES.has(endpoint.class)) return { cost_usd: 0, price_source: NOT_BILLED };
  if (endpoint.usage)
    return unpriced(model ? `the response reported no usage for ${model}` : 'the response reported no usage');
  return unpriced(
    `keyrelay does not know what ${endpoint.class === 'other' ? 'this endpoint' : endpoint.class} bills`,
  );
}
