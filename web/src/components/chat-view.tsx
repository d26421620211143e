/** A conversation from the log: one block per turn, tool calls and results as their own boxes. */
import type { ChatMessage, Part } from '../lib/chat.js';

function prettyArgs(args: string): string {
  try {
    return JSON.stringify(JSON.parse(args), null, 2);
  } catch {
    return args;
  }
}

function PartView({ part }: { part: Part }) {
  switch (part.type) {
    case 'text':
      return <div className="chat-text">{part.text}</div>;
    case 'thinking':
      return (
        <details className="chat-thinking">
          <summary>Thinking</summary>
          <div className="chat-text">{part.text}</div>
        </details>
      );
    case 'image':
      return <span className="chat-placeholder">[{part.label} not kept in the log]</span>;
    case 'tool_call':
      return (
        <div className="chat-tool" data-part="tool-call">
          <div className="chat-tool-head">
            Calls <code>{part.name}</code>
            {part.id && <span className="muted small"> · {part.id}</span>}
          </div>
          <pre>{prettyArgs(part.args)}</pre>
        </div>
      );
    case 'tool_result':
      return (
        <div className="chat-tool chat-tool-result" data-part="tool-result">
          <div className="chat-tool-head">
            Tool result{part.id && <span className="muted small"> · {part.id}</span>}
          </div>
          <pre>{part.text}</pre>
        </div>
      );
  }
}

export function ChatView({ messages, label }: { messages: ChatMessage[]; label: string }) {
  if (messages.length === 0) return <p className="muted">No messages.</p>;
  return (
    <ol className="chat" aria-label={label}>
      {messages.map((m, i) => (
        <li key={i} className={`chat-msg chat-${m.role}`} data-role={m.role}>
          <div className="chat-role">{m.role}</div>
          <div className="chat-parts">
            {m.parts.length === 0 ? (
              <span className="muted small">(empty)</span>
            ) : (
              m.parts.map((p, j) => <PartView key={j} part={p} />)
            )}
          </div>
        </li>
      ))}
    </ol>
  );
}
