import { useMemo, useState } from 'react';
import { requestChat, responseChat } from '../lib/chat.js';
import { looksLikeSse, parseSse, prettyBody, reassembleSse } from '../lib/sse.js';
import { Badge } from './badge.js';
import { ChatView } from './chat-view.js';
import { CodeBlock } from './quickstart.js';
import { Tabs } from './tabs.js';

function TruncatedNote({ truncated }: { truncated: boolean }) {
  if (!truncated) return null;
  return (
    <p className="truncated-note">
      <Badge tone="amber">Truncated</Badge> Only the first part of this body was kept
      (KEYRELAY_BODY_LOG_BYTES).
    </p>
  );
}

/** A logged body: pretty JSON, or for a streamed response the reassembled text with the raw events a click away. */
export function BodyView({
  id,
  title,
  body,
  truncated,
  contentType,
  side = 'request',
  missing,
}: {
  id: string;
  title: string;
  body: string | null;
  truncated: boolean;
  contentType?: string;
  /** Which side of the exchange: decides how the chat view reads the body. */
  side?: 'request' | 'response';
  /** Why there is no body, when the row says more than "not logged" (e.g. refused before it was read). */
  missing?: string;
}) {
  const sse = useMemo(
    () => (body && looksLikeSse(body, contentType) ? parseSse(body) : null),
    [body, contentType],
  );
  const text = useMemo(() => (sse ? reassembleSse(sse) : null), [sse]);
  const [view, setView] = useState<'text' | 'events'>('text');
  const chat = useMemo(
    () => (side === 'request' ? requestChat(body) : responseChat(body, sse !== null)),
    [body, side, sse],
  );
  const [pane, setPane] = useState<'chat' | 'raw'>('chat');

  let content;
  if (body === null) {
    content = (
      <p className="muted" data-testid={`${id}-missing`}>
        {missing ??
          'Not logged: turned off for this request, body logging is disabled, or the log store was down long enough that keyrelay kept only the row.'}
      </p>
    );
  } else if (body === '') {
    content = <p className="muted">Empty body.</p>;
  } else if (sse) {
    const showText = view === 'text' && text !== null;
    content = (
      <>
        <div className="body-toolbar">
          <span className="muted small">Streamed response · {sse.length} events</span>
          {text !== null && (
            <Tabs
              idPrefix={`${id}-view`}
              size="sm"
              label="Response view"
              value={view}
              onChange={(v) => setView(v as 'text' | 'events')}
              items={[
                { id: 'text', label: 'Reassembled' },
                { id: 'events', label: 'Raw events' },
              ]}
            />
          )}
        </div>
        <div id={`${id}-view-panel`} role="tabpanel">
          {showText ? (
            <div className="reassembled" data-testid="reassembled">
              {text || <span className="muted">(no text)</span>}
            </div>
          ) : (
            <CodeBlock
              label="Raw events"
              code={sse.map((e) => (e.event ? `event: ${e.event}\n` : '') + `data: ${e.data}`).join('\n\n')}
            />
          )}
        </div>
      </>
    );
  } else {
    const pretty = prettyBody(body);
    content = <CodeBlock code={pretty.text} label={pretty.json ? 'JSON' : 'Text'} />;
  }

  return (
    <section className="card section" aria-labelledby={`${id}-title`}>
      <div className="section-head">
        <h2 id={`${id}-title`}>{title}</h2>
      </div>
      <TruncatedNote truncated={truncated} />
      {chat ? (
        <div className="body-panes">
          <div className="view-tabs">
            <Tabs
              idPrefix={`${id}-pane`}
              size="sm"
              label={`${title} view`}
              value={pane}
              onChange={(v) => setPane(v as 'chat' | 'raw')}
              items={[
                { id: 'chat', label: 'Chat' },
                { id: 'raw', label: 'Raw' },
              ]}
            />
          </div>
          <div className="panes-grid" id={`${id}-pane-panel`}>
            <div className={`pane ${pane === 'chat' ? 'selected' : ''}`} data-testid={`${id}-chat`}>
              <ChatView messages={chat} label={`${title} as a conversation`} />
            </div>
            <div className={`pane ${pane === 'raw' ? 'selected' : ''}`} data-testid={`${id}-raw`}>
              {content}
            </div>
          </div>
        </div>
      ) : (
        content
      )}
    </section>
  );
}
