/**
 * One WebSocket connection: its own row (opened, closed, close code and reason, messages and bytes each
 * way) and the model responses on it, with tokens and cost.
 */
import { ApiError, api, type RequestLogRow, type RequestSummary } from '../api.js';
import { ErrorCodeBadge, StatusBadge } from '../components/badge.js';
import { EmptyState, ErrorState, LoadingState } from '../components/states.js';
import { closeCodeText } from '../lib/connections.js';
import {
  formatBytes,
  formatCost,
  formatDateTime,
  formatMs,
  formatNumber,
  PROVIDER_LABELS,
} from '../lib/format.js';
import { useAsync } from '../lib/use-async.js';
import { Link, navigate } from '../router.js';

interface Loaded {
  socket: RequestLogRow | null;
  responses: RequestSummary[];
}

async function load(id: string): Promise<Loaded> {
  const socket = await api.getRequest(id).then(
    (r) => r.request,
    (e: unknown) => {
      // A socket still open has no row of its own yet; its responses may already be logged.
      if (e instanceof ApiError && e.status === 404) return null;
      throw e;
    },
  );
  const responses: RequestSummary[] = [];
  let cursor: string | null = null;
  do {
    const page = await api.listRequests({ connection_id: id, limit: 200, cursor });
    responses.push(...page.items.filter((r) => r.id !== id));
    cursor = page.next_cursor;
  } while (cursor && responses.length < 2000);
  return { socket, responses: responses.reverse() };
}

const sum = (rows: RequestSummary[], f: (r: RequestSummary) => number | null | undefined) =>
  rows.reduce((n, r) => n + (f(r) ?? 0), 0);

export function ConnectionDetailPage({ id }: { id: string }) {
  const { data, error, reload } = useAsync(() => load(id), [id]);
  if (error) return <ErrorState error={error} onRetry={reload} />;
  if (!data) return <LoadingState />;
  const { socket: s, responses } = data;
  if (!s && responses.length === 0) return <EmptyState title="No such connection" />;
  const priced = responses.filter((r) => r.cost_usd !== null);
  const facts: [string, string][] = s
    ? [
        ['Opened', formatDateTime(s.created_at)],
        ['Duration', formatMs(s.latency_ms)],
        ['Upstream handshake', formatMs(s.ttfb_ms)],
        ['Close code', closeCodeText(s.ws_close_code)],
        ['Close reason', s.ws_close_reason ?? '—'],
        ['Messages caller → upstream', formatNumber(s.ws_messages_in ?? null)],
        ['Messages upstream → caller', formatNumber(s.ws_messages_out ?? null)],
        ['Bytes caller → upstream', formatBytes(s.request_bytes)],
        ['Bytes upstream → caller', formatBytes(s.response_bytes)],
      ]
    : [['State', 'open (its own row is written when it closes)']];
  return (
    <>
      <nav className="breadcrumb" aria-label="Breadcrumb">
        <Link to="/requests">← Requests</Link>
      </nav>
      <header className="page-header detail-header">
        <div>
          <h1 className="detail-title">
            <span className="method">WebSocket</span>{' '}
            <span className="path">{s?.path ?? responses[0]?.path}</span>
          </h1>
          {s && (
            <p className="muted detail-meta">
              <StatusBadge status={s.status} outcome={s.outcome} /> <ErrorCodeBadge code={s.error_code} />{' '}
              {PROVIDER_LABELS[s.provider] ?? s.provider} · {s.model ?? 'no model'}
            </p>
          )}
        </div>
        <code className="muted small request-id" title="connection_id">
          {id}
        </code>
      </header>
      <div className="detail-grid">
        <section className="card detail-card">
          <h2>Connection</h2>
          <dl className="facts">
            {facts.map(([k, v]) => (
              <div key={k} className="fact">
                <dt>{k}</dt>
                <dd>{v}</dd>
              </div>
            ))}
          </dl>
        </section>
        <section className="card detail-card">
          <h2>Totals</h2>
          <dl className="facts">
            {(
              [
                ['Responses', formatNumber(responses.length)],
                ['Input tokens', formatNumber(sum(responses, (r) => r.input_tokens))],
                ['Output tokens', formatNumber(sum(responses, (r) => r.output_tokens))],
                [
                  'Audio tokens in / out',
                  `${formatNumber(sum(responses, (r) => r.input_audio_tokens))} / ${formatNumber(sum(responses, (r) => r.output_audio_tokens))}`,
                ],
                ['Cost', priced.length ? formatCost(sum(priced, (r) => r.cost_usd)) : '—'],
              ] as [string, string][]
            ).map(([k, v]) => (
              <div key={k} className="fact">
                <dt>{k}</dt>
                <dd>{v}</dd>
              </div>
            ))}
          </dl>
        </section>
      </div>
      <div className="table-wrap card">
        <table className="table table-hover connection-responses">
          <thead>
            <tr>
              <th scope="col">Time</th>
              <th scope="col">Model</th>
              <th scope="col">Status</th>
              <th scope="col" className="num">
                Tokens in / out
              </th>
              <th scope="col" className="num">
                Audio in / out
              </th>
              <th scope="col" className="num">
                Cost
              </th>
              <th scope="col" className="num">
                First delta
              </th>
              <th scope="col" className="num">
                Latency
              </th>
            </tr>
          </thead>
          <tbody>
            {responses.length === 0 ? (
              <tr>
                <td colSpan={8} className="muted">
                  No model response on this connection.
                </td>
              </tr>
            ) : (
              responses.map((r) => (
                <tr
                  key={r.id}
                  className="clickable"
                  onClick={() => navigate(`/requests/${encodeURIComponent(r.id)}`)}
                >
                  <td className="nowrap">
                    <Link to={`/requests/${encodeURIComponent(r.id)}`} onClick={(e) => e.stopPropagation()}>
                      {formatDateTime(r.created_at)}
                    </Link>
                  </td>
                  <td>{r.model ?? '—'}</td>
                  <td>
                    <StatusBadge status={r.status} outcome={r.outcome} />{' '}
                    <ErrorCodeBadge code={r.error_code} />
                  </td>
                  <td className="num nowrap">
                    {formatNumber(r.input_tokens)} / {formatNumber(r.output_tokens)}
                  </td>
                  <td className="num nowrap">
                    {formatNumber(r.input_audio_tokens ?? null)} /{' '}
                    {formatNumber(r.output_audio_tokens ?? null)}
                  </td>
                  <td className="num nowrap">{r.outcome === 'refused' ? '—' : formatCost(r.cost_usd)}</td>
                  <td className="num nowrap">{formatMs(r.ttfb_ms)}</td>
                  <td className="num nowrap">{formatMs(r.latency_ms)}</td>
                </tr>
              ))
            )}
          </tbody>
        </table>
      </div>
    </>
  );
}
