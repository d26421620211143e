/**
 * Every batch of the account: status, request counts and the cost of its results. A batch whose
 * results have not passed through keyrelay says so instead of showing $0.
 */
import { api, type BatchRecord } from '../api.js';
import { formatCost, formatDateTime, formatNumber } from '../lib/format.js';
import { useAsync } from '../lib/use-async.js';
import { ErrorState, LoadingState } from './states.js';

/** OpenAI counts total/completed/failed, Anthropic processing/succeeded/errored/canceled/expired. */
function counts(b: BatchRecord): string {
  const entries = Object.entries(b.request_counts).filter(([, n]) => n > 0 || b.provider === 'openai');
  if (entries.length === 0) return '—';
  return entries.map(([k, n]) => `${formatNumber(n)} ${k}`).join(', ');
}

function resultsCost(b: BatchRecord): string {
  if (b.results_fetched_at === null) return 'results not yet fetched';
  const cost = b.results_cost_usd === null ? 'unpriced' : formatCost(b.results_cost_usd);
  const notes = [
    (b.results_unpriced ?? 0) > 0 ? `${formatNumber(b.results_unpriced)} unpriced` : '',
    (b.results_broken ?? 0) > 0 ? `${formatNumber(b.results_broken)} unreadable` : '',
  ].filter(Boolean);
  return notes.length ? `${cost} (+ ${notes.join(', ')})` : cost;
}

export function BatchesPanel({ keyLabel }: { keyLabel: (id: string) => string }) {
  const batches = useAsync(() => api.listBatches(), []);
  return (
    <section className="card batches" aria-label="Batches">
      <h2>Batches</h2>
      {batches.error ? (
        <ErrorState error={batches.error} onRetry={batches.reload} />
      ) : !batches.data ? (
        <LoadingState label="Loading batches…" />
      ) : batches.data.batches.length === 0 ? (
        <p className="muted small">No batches yet. Batches created or fetched through keyrelay show here.</p>
      ) : (
        <div className="table-wrap">
          <table className="table table-compact table-stack" data-testid="batches">
            <thead>
              <tr>
                <th scope="col">Batch</th>
                <th scope="col">Key</th>
                <th scope="col">Status</th>
                <th scope="col">Requests</th>
                <th scope="col" className="num">
                  Cost
                </th>
              </tr>
            </thead>
            <tbody>
              {batches.data.batches.map((b) => (
                <tr key={`${b.provider}:${b.batch_id}`}>
                  <td data-label="Batch">
                    <code>{b.batch_id}</code>
                    <div className="muted small">
                      {b.provider} · {formatDateTime(b.created_at)}
                      {b.created_here ? '' : ' · created elsewhere'}
                    </div>
                  </td>
                  <td data-label="Key">{keyLabel(b.key_id)}</td>
                  <td data-label="Status">{b.status ?? '—'}</td>
                  <td data-label="Requests">{counts(b)}</td>
                  <td
                    data-label="Cost"
                    className={`num ${b.results_cost_usd === null ? 'muted' : ''}`}
                    data-testid="batch-cost"
                  >
                    {resultsCost(b)}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
