/** Console API on a real listener with real SQLite stores in a temp dir, and a cookie-keeping client. */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import { request } from 'undici';
import { MemoryLoginThrottle, type LoginThrottle } from '../src/accounts/throttle.js';
import { loadConfig, type Config } from '../src/config.js';
import { registerConsoleApi } from '../src/console-api/index.js';
import { LocalKeyEventBus } from '../src/keys/events.js';
import { SqliteConfigStore } from '../src/store/sqlite/config-store.js';
import { SqliteLogStore } from '../src/store/sqlite/log-store.js';

export interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- response bodies are checked by assertions
  json: any;
}

export interface ConsoleApp {
  app: FastifyInstance;
  base: string;
  config: Config;
  configStore: SqliteConfigStore;
  logStore: SqliteLogStore;
  bus: LocalKeyEventBus;
  /** The clock sessions and key actions see; move it with `advance`. */
  advance(ms: number): void;
  client(): Client;
  close(): Promise<void>;
}

export async function startConsole(
  opts: { config?: Partial<Config>; throttle?: LoginThrottle; trustProxy?: boolean; dir?: string } = {},
): Promise<ConsoleApp> {
  const dir = opts.dir ?? (await mkdtemp(join(tmpdir(), 'kr-console-')));
  const configStore = new SqliteConfigStore(join(dir, 'config.db'));
  await configStore.migrate();
  const logStore = new SqliteLogStore(join(dir, 'log.db'));
  await logStore.migrate();
  const config = { ...loadConfig({}), ...opts.config };
  const bus = new LocalKeyEventBus();
  let offset = 0;
  const app = Fastify({ trustProxy: opts.trustProxy ?? false });
  await registerConsoleApi(app, {
    config,
    configStore,
    logStore,
    bus,
    throttle: opts.throttle ?? new MemoryLoginThrottle(),
    now: () => new Date(Date.now() + offset),
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const address = app.server.address();
  const base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  return {
    app,
    base,
    config,
    configStore,
    logStore,
    bus,
    advance: (ms) => {
      offset += ms;
    },
    client: () => new Client(base),
    close: async () => {
      await app.close();
      await configStore.close();
      await logStore.close();
      if (!opts.dir) await rm(dir, { recursive: true, force: true });
    },
  };
}

export function sessionCookieOf(headers: Reply['headers']): string | undefined {
  const raw = headers['set-cookie'];
  const all = Array.isArray(raw) ? raw : raw ? [raw] : [];
  return all.find((c) => c.startsWith('kr_session='));
}

/** A browser-like client: keeps kr_session, sends JSON for state changes. */
export class Client {
  cookie: string | undefined;
  constructor(readonly base: string) {}

  async call(
    method: 'GET' | 'POST' | 'PATCH' | 'DELETE' | 'PUT',
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<Reply> {
    const h: Record<string, string> = { ...headers };
    if (this.cookie && h.cookie === undefined) h.cookie = `kr_session=${this.cookie}`;
    let payload: string | undefined;
    if (method !== 'GET') {
      h['content-type'] ??= 'application/json';
      payload = typeof body === 'string' ? body : JSON.stringify(body ?? {});
    }
    const res = await request(`${this.base}/api/console${path}`, { method, headers: h, body: payload });
    const text = await res.body.text();
    const set = sessionCookieOf(res.headers);
    if (set) {
      const value = set.slice('kr_session='.length).split(';')[0]!;
      this.cookie = value === '' ? undefined : value;
    }
    let json: unknown = null;
    try {
      json = text ? JSON.parse(text) : null;
    } catch {
      json = null;
    }
    return { status: res.statusCode, headers: res.headers, text, json };
  }

  get(path: string, headers?: Record<string, string>): Promise<Reply> {
    return this.call('GET', path, undefined, headers);
  }
  post(path: string, body?: unknown, headers?: Record<string, string>): Promise<Reply> {
    return this.call('POST', path, body, headers);
  }
  patch(path: string, body?: unknown, headers?: Record<string, string>): Promise<Reply> {
    return this.call('PATCH', path, body, headers);
  }
  put(path: string, body?: unknown, headers?: Record<string, string>): Promise<Reply> {
    return this.call('PUT', path, body, headers);
  }
  delete(path: string, headers?: Record<string, string>): Promise<Reply> {
    return this.call('DELETE', path, undefined, headers);
  }

  /** Sign-up then the first sign-in, as the console does: the reply is the login's (account, default key). */
  async signup(email: string, password = 'correct horse battery'): Promise<Reply> {
    const r = await this.post('/signup', { email, password });
    if (r.status !== 202) throw new Error(`signup failed: ${r.status} ${r.text}`);
    const login = await this.post('/login', { email, password });
    if (login.status !== 200) throw new Error(`first sign-in failed: ${login.status} ${login.text}`);
    return login;
  }
}
