/**
 * Which provider and model a key may use. Model patterns are compiled once per allow-list array: a changed
 * key arrives as a new KeyRecord (new array), so the WeakMap never serves a stale list.
 */
import type { Provider } from '../types.js';
import type { KeyLimits } from '../store/types.js';
import type { RequestInfo } from '../metering/index.js';

export const MAX_MODEL_PATTERNS = 50;
export const MAX_MODEL_PATTERN_LENGTH = 200;

interface ModelMatcher {
  exact: Set<string>;
  prefixes: string[];
}

const compiled = new WeakMap<readonly string[], ModelMatcher>();

function matcherFor(patterns: readonly string[]): ModelMatcher {
  let m = compiled.get(patterns);
  if (!m) {
    m = { exact: new Set(), prefixes: [] };
    for (const p of patterns) {
      if (p.endsWith('*')) m.prefixes.push(p.slice(0, -1));
      else m.exact.add(p);
    }
    compiled.set(patterns, m);
  }
  return m;
}

/** An exact model name, or a prefix followed by one trailing `*` (`gpt-4o*`, `*` alone = any model). */
export function isValidModelPattern(p: string): boolean {
  if (p.length === 0 || p.length > MAX_MODEL_PATTERN_LENGTH || /[\s\x00-\x1f]/.test(p)) return false;
  const star = p.indexOf('*');
  return star === -1 || star === p.length - 1;
}

export function isModelAllowed(patterns: readonly string[], model: string): boolean {
  const m = matcherFor(patterns);
  if (m.exact.has(model)) return true;
  for (const prefix of m.prefixes) if (model.startsWith(prefix)) return true;
  return false;
}

/**
 * Whether the key may send this request. With a model allow-list, a request whose body names no model is
 * let through only when it reads (GET/HEAD: model lists, retrieving files or responses): a POST without a
 * visible model (batches, file uploads, multipart audio) could reach any model, so it is refused.
 */
export function isRequestAllowed(
  limits: Pick<KeyLimits, 'allowed_providers' | 'allowed_models'>,
  provider: Provider,
  model: string | null,
  method: string | undefined,
): boolean {
  if (limits.allowed_providers && !limits.allowed_providers.includes(provider)) return false;
  const models = limits.allowed_models;
  if (!models) return true;
  if (model === null) return method === 'GET' || method === 'HEAD';
  return isModelAllowed(models, model);
}

/**
 * The model a request is refused for under the key's lists (null: it names none keyrelay could read), or
 * undefined when it is allowed. A batch (creation, or its input file's upload) runs the models its requests
 * name, every one of which must be allowed; one whose requests keyrelay has not read is refused.
 */
export function refusedModel(
  limits: Pick<KeyLimits, 'allowed_providers' | 'allowed_models'>,
  provider: Provider,
  info: Pick<RequestInfo, 'model' | 'batch'>,
  method: string | undefined,
): string | null | undefined {
  const batch = info.batch;
  if (
    !batch ||
    !limits.allowed_models ||
    (limits.allowed_providers && !limits.allowed_providers.includes(provider))
  )
    return isRequestAllowed(limits, provider, info.model, method) ? undefined : info.model;
  if ('inputFile' in batch || batch.unreadable > 0 || batch.models.length === 0) return null;
  return batch.models.find((m) => !isModelAllowed(limits.allowed_models!, m));
}
