/** The request log's marks for WebSocket rows: a socket row links to its connection view; responses are nested. */
import { Link } from '../router.js';
import type { LogLine } from '../lib/connections.js';

type TagProps = Omit<LogLine<unknown>, 'row'> & { row: { id: string; connection_id?: string | null } };

export function ConnectionTag(line: TagProps) {
  if (line.kind === 'plain') return null;
  const id = line.row.connection_id ?? line.row.id;
  const to = `/connections/${encodeURIComponent(id)}`;
  if (line.kind === 'socket') {
    return (
      <Link
        className="tag tag-socket"
        to={to}
        onClick={(e) => e.stopPropagation()}
        title="WebSocket connection"
      >
        WebSocket{line.responses > 0 ? ` · ${line.responses} response${line.responses === 1 ? '' : 's'}` : ''}
      </Link>
    );
  }
  return (
    <Link
      className="tag tag-socket-response"
      to={to}
      onClick={(e) => e.stopPropagation()}
      title="On a WebSocket"
    >
      on socket
    </Link>
  );
}

/** Class for a table row: responses nested under their socket are indented. */
export function connectionRowClass(kind: LogLine<unknown>['kind']): string {
  return kind === 'response' ? 'row-socket-response' : kind === 'socket' ? 'row-socket' : '';
}
