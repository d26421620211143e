import { useState } from 'react';
import { api, type Reconciliation } from '../api.js';
import { Badge } from '../components/badge.js';
import { formatNumber } from '../lib/format.js';

/** The Provider bills page's token columns and its per-API-key table (reconcile.tsx). */
type ProviderView = Reconciliation['providers'][number];
type ModelView = ProviderView['models'][number];
type KeyView = ProviderView['keys'][number];
type TokenView = ModelView['tokens'][number];

const KIND_LABELS: Record<TokenView['kind'], string> = {
  input: 'Input',
  cache_read: 'Cached',
  cache_write: 'Cache write',
  output: 'Output',
};

function signedCount(n: number): string {
  if (n === 0) return '0';
  return `${n > 0 ? '+' : '−'}${formatNumber(Math.abs(n))}`;
}

/** Drift as a share of what the provider counted: +50.0% means keyrelay saw half of it. */
function driftText(d: number | null): string {
  if (d === null) return '—';
  if (d === 0) return '0%';
  return `${d > 0 ? '+' : '−'}${(Math.abs(d) * 100).toFixed(1)}%`;
}

/** Each token kind on a line: keyrelay's / the provider's, and the difference where there is one. */
export function TokenLines({ tokens }: { tokens: readonly TokenView[] }) {
  return (
    <ul className="reconcile-tokens small">
      {tokens.map((t) => (
        <li key={t.kind}>
          <span className="muted">{KIND_LABELS[t.kind]}</span> {formatNumber(t.keyrelay)} /{' '}
          {formatNumber(t.provider)}
          {t.difference !== 0 && (
            <span className="reconcile-drift">
              {' '}
              {signedCount(t.difference)} ({driftText(t.drift)})
            </span>
          )}
        </li>
      ))}
    </ul>
  );
}

/** The day's tokens by kind: a plain table, narrow enough for a phone without stacking. */
export function TokenTotals({ label, tokens }: { label: string; tokens: readonly TokenView[] }) {
  return (
    <>
      <h3 className="reconcile-sub">Tokens</h3>
      <div className="table-wrap">
        <table
          className="table reconcile-token-table"
          aria-label={`${label}: tokens, keyrelay beside the usage report`}
        >
          <thead>
            <tr>
              <th scope="col">Kind</th>
              <th scope="col" className="num">
                keyrelay
              </th>
              <th scope="col" className="num">
                {label}
              </th>
              <th scope="col" className="num">
                <abbr title="Difference: the provider's count minus keyrelay's">Diff.</abbr>
              </th>
              <th scope="col" className="num">
                Drift
              </th>
            </tr>
          </thead>
          <tbody>
            {tokens.map((t) => (
              <tr key={t.kind}>
                <th scope="row">{KIND_LABELS[t.kind]}</th>
                <td className="num">{formatNumber(t.keyrelay)}</td>
                <td className="num">{formatNumber(t.provider)}</td>
                <td className="num">{signedCount(t.difference)}</td>
                <td className="num">{driftText(t.drift)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </>
  );
}

/** Ties a provider key id to one of the day's credentials keyrelay saw, or unties it. */
function LinkControl({
  provider,
  k,
  choices,
  onChanged,
}: {
  provider: string;
  k: KeyView;
  choices: readonly string[];
  onChanged: () => void;
}) {
  const [choice, setChoice] = useState(choices[0] ?? '');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const run = (action: () => Promise<unknown>) => {
    setBusy(true);
    setError(null);
    action()
      .then(onChanged)
      .catch((e: unknown) => setError(e instanceof Error ? e.message : String(e)))
      .finally(() => setBusy(false));
  };
  if (k.api_key_id === null) return <span className="muted small">No API key</span>;
  const id = k.api_key_id;
  if (k.fingerprint !== null)
    return (
      <span className="reconcile-link">
        <code title={k.fingerprint}>{k.fingerprint.slice(0, 12)}…</code>
        <button
          type="button"
          className="btn btn-secondary btn-sm"
          disabled={busy}
          aria-label={`Unlink ${id}`}
          onClick={() => run(() => api.unlinkProviderKey(provider, id))}
        >
          Unlink
        </button>
      </span>
    );
  if (choices.length === 0) return <span className="muted small">Not linked</span>;
  return (
    <span className="reconcile-link">
      <select
        aria-label={`Credential for ${id}`}
        value={choice}
        onChange={(e) => setChoice(e.target.value)}
        disabled={busy}
      >
        {choices.map((fp) => (
          <option key={fp} value={fp}>
            {fp.slice(0, 12)}…
          </option>
        ))}
      </select>
      <button
        type="button"
        className="btn btn-secondary btn-sm"
        disabled={busy || choice === ''}
        aria-label={`Link ${id}`}
        onClick={() => run(() => api.linkProviderKey(provider, id, choice))}
      >
        Link
      </button>
      {error && (
        <span className="form-error small" role="alert">
          {error}
        </span>
      )}
    </span>
  );
}

export function KeysTable({
  p,
  label,
  onChanged,
}: {
  p: ProviderView;
  label: string;
  onChanged: () => void;
}) {
  const choices = p.unlinked_credentials.map((c) => c.fingerprint);
  return (
    <>
      <h3 className="reconcile-sub">By {label} API key</h3>
      <p className="muted small">
        {label}'s usage report names its API key ids, never the keys. Link a key id to the credential it is
        (keyrelay knows a credential only by its fingerprint, shown on Credentials) to compare it here; a key
        left unlinked is usage keyrelay cannot account for.
      </p>
      <div className="table-wrap">
        <table className="table table-stack" aria-label={`${label}: tokens by API key`}>
          <thead>
            <tr>
              <th scope="col">API key id</th>
              <th scope="col">Credential</th>
              <th scope="col">Tokens (keyrelay / {label})</th>
              <th scope="col">Where it comes from</th>
            </tr>
          </thead>
          <tbody>
            {p.keys.map((k) => (
              <tr key={k.api_key_id ?? '(none)'}>
                <td className="stack-title">
                  {k.api_key_id ? (
                    <code className="nowrap">{k.api_key_id}</code>
                  ) : (
                    <span className="muted">None</span>
                  )}
                  {k.agrees === true && (
                    <>
                      {' '}
                      <Badge tone="green">Agrees</Badge>
                    </>
                  )}
                  {k.agrees === false && (
                    <>
                      {' '}
                      <Badge tone="amber">Drift</Badge>
                    </>
                  )}
                </td>
                <td data-label="Credential">
                  <LinkControl provider={p.provider} k={k} choices={choices} onChanged={onChanged} />
                </td>
                <td data-label="Tokens">
                  {k.keyrelay === null ? (
                    <span className="small">
                      <span className="muted">Input</span> {formatNumber(k.provider.input_tokens)}{' '}
                      <span className="muted">Output</span> {formatNumber(k.provider.output_tokens)}
                    </span>
                  ) : (
                    <TokenLines tokens={k.tokens} />
                  )}
                </td>
                <td data-label="Why">
                  {k.reasons.length === 0 ? (
                    <span className="muted small">Agrees</span>
                  ) : (
                    <ul className="reconcile-reasons small">
                      {k.reasons.map((r) => (
                        <li key={r}>{r}</li>
                      ))}
                    </ul>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {p.unlinked_credentials.length > 0 && (
        <p className="muted small">
          Credentials keyrelay saw that day, linked to no {label} key id:{' '}
          {p.unlinked_credentials.map((c, i) => (
            <span key={c.fingerprint}>
              {i > 0 && ', '}
              <code title={c.fingerprint}>{c.fingerprint.slice(0, 12)}…</code> ({formatNumber(c.requests)}{' '}
              calls)
            </span>
          ))}
        </p>
      )}
    </>
  );
}
