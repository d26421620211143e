/** How the shared WHERE builder (log-query.ts) writes placeholders, properties and search on PostgreSQL. */
import type { WhereDialect } from '../log-query.js';

export function dialect(params: unknown[]): WhereDialect {
  return {
    bind(value) {
      params.push(value);
      return `$${params.length}`;
    },
    propertyEquals: (name, value) => `properties ->> (${name}::text) = ${value}::text`,
    propertyPresent: (name) => `properties ->> (${name}::text) IS NOT NULL`,
    // Each group as plainto_tsquery reads it (its words ANDed, no syntax), the groups ORed.
    search: (groups) =>
      `search_vector @@ (${groups
        .map((g) => {
          params.push(g.join(' '));
          return `plainto_tsquery('simple', $${params.length})`;
        })
        .join(' || ')})`,
  };
}
