/**
 * The relay: WebSockets through keyrelay on real sockets against the fake OpenAI upstream's
 * WebSocket side. Handshake (key in header or subprotocol, header hygiene, path byte-exact), messages of
 * every kind both ways, ping/pong, close codes both ways, drops on either side.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { startHarness, type Harness } from './helpers/keyrelay.js';
import { rawExchange, rawHead } from './helpers/raw-http.js';
import { mustOpen, mustRefuse, openWs, wsUrl, type WsClient } from './helpers/ws.js';

let h: Harness;
let key: string;
const AUTH = 'Bearer sk-test-ws-AbC_09';

beforeAll(async () => {
  h = await startHarness();
  ({ key } = await h.newUser());
});
afterAll(() => h.close());

const RT = '/api/proxy/openai/v1/realtime?model=gpt-realtime';

function viaKeyrelay(path = RT, headers: Record<string, string> = {}, protocols?: string[]) {
  return openWs(wsUrl(h.url, path), {
    headers: { 'proxy-api-key': key, authorization: AUTH, ...headers },
    protocols,
  });
}

const lastConn = () => h.openai.ws.connections[h.openai.ws.connections.length - 1]!;

async function until(pred: () => boolean, timeoutMs = 3000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error('condition not reached');
    await new Promise((r) => setTimeout(r, 2));
  }
}

describe('handshake', () => {
  it('relays to the same path and query, byte for byte, with the same header hygiene as HTTP', async () => {
    const path = "/api/proxy/openai/v1/realtime?model=gpt-realtime&x='q'&y=%7Bz%7D";
    const c = await mustOpen(
      openWs(wsUrl(h.url, '/'), {
        rawPath: path,
        headers: {
          'proxy-api-key': key,
          Authorization: AUTH,
          'OpenAI-Beta': 'realtime=v1',
          'openai-organization': 'org-AbC123',
          'X-Custom_Odd': 'v; "q"',
          'proxy-session': 'sess-1',
          Cookie: 'kr_session=abc',
          'X-Forwarded-For': '203.0.113.7',
        },
      }),
    );
    const up = lastConn();
    expect(up.url).toBe("/v1/realtime?model=gpt-realtime&x='q'&y=%7Bz%7D");
    const raw = up.rawHeaders;
    const pairs: [string, string][] = [];
    for (let i = 0; i < raw.length; i += 2) pairs.push([raw[i]!, raw[i + 1]!]);
    expect(pairs).toContainEqual(['Authorization', AUTH]);
    expect(pairs).toContainEqual(['OpenAI-Beta', 'realtime=v1']);
    expect(pairs).toContainEqual(['openai-organization', 'org-AbC123']);
    expect(pairs).toContainEqual(['X-Custom_Odd', 'v; "q"']);
    const names = pairs.map(([n]) => n.toLowerCase());
    for (const gone of ['proxy-api-key', 'proxy-session', 'cookie', 'x-forwarded-for'])
      expect(names).not.toContain(gone);
    expect(up.headers.host).toBe(`127.0.0.1:${h.openai.port}`);
    expect(c.upgradeHeaders['x-keyrelay-connection-id']).toMatch(/^[0-9A-Za-z]+$/);
    // Upstream's own 101 headers reach the caller, minus set-cookie (as on the HTTP path).
    expect(c.upgradeHeaders['x-request-id']).toBe('req_fake_ws');
    expect(c.upgradeHeaders['set-cookie']).toBeUndefined();
    c.ws.close();
    await c.closed;
  });

  it('takes the key as a keyrelay-key subprotocol (browsers) and removes it; other entries pass', async () => {
    const c = await mustOpen(
      openWs(wsUrl(h.url, RT), {
        protocols: [
          'realtime',
          `keyrelay-key.${key}`,
          'openai-insecure-api-key.sk-test-browser',
          'openai-beta.realtime-v1',
        ],
      }),
    );
    const up = lastConn();
    expect(up.offered).toEqual([
      'realtime',
      'openai-insecure-api-key.sk-test-browser',
      'openai-beta.realtime-v1',
    ]);
    expect(JSON.stringify(up.rawHeaders)).not.toContain(key);
    // The subprotocol upstream accepted is the caller's.
    expect(up.protocol).toBe('realtime');
    expect(c.ws.protocol).toBe('realtime');
    const id = c.upgradeHeaders['x-keyrelay-connection-id'] as string;
    c.ws.close();
    await c.closed;
    // The socket's row names the entries but keeps neither key; the OpenAI one is fingerprinted.
    const accountId = (await h.kr.services.keys.check(key)).key!.account_id;
    const readRow = async () => {
      for (let i = 0; i < 100; i++) {
        await h.flushLog();
        const found = await h.kr.services.logStore.getRequest(accountId, id);
        if (found) return found;
        await new Promise((r) => setTimeout(r, 20));
      }
      throw new Error('no socket row');
    };
    const row = await readRow();
    expect(row.request_headers['sec-websocket-protocol']).toBe(
      'realtime, keyrelay-key.[redacted], openai-insecure-api-key.[redacted], openai-beta.realtime-v1',
    );
    expect(JSON.stringify(row)).not.toContain(key);
    expect(JSON.stringify(row)).not.toContain('sk-test-browser');
    expect(row.credential_fingerprint).toMatch(/^[0-9a-f]{32}$/);
  });

  it('answers with no subprotocol when upstream chose none, as upstream would', async () => {
    const direct = openWs(wsUrl(h.openai.url, '/v1/realtime?model=gpt-realtime'), {
      headers: { authorization: AUTH },
      protocols: ['something-else'],
    });
    await expect(direct).rejects.toThrow('Server sent no subprotocol');
    await expect(viaKeyrelay(RT, {}, ['something-else'])).rejects.toThrow('Server sent no subprotocol');
    expect(lastConn().offered).toEqual(['something-else']);
    expect(lastConn().protocol).toBe('');
  });

  it('passes an upstream refusal of the upgrade back unchanged (status, headers, body)', async () => {
    const before = h.openai.ws.refused.length;
    const r = await mustRefuse(viaKeyrelay(RT, { 'x-fake-ws-refuse': '401' }));
    expect(h.openai.ws.refused.length).toBe(before + 1);
    expect(r.status).toBe(401);
    expect(r.headers['x-request-id']).toBe('req_fake_refused');
    expect(r.headers['content-type']).toBe('application/json');
    expect(r.headers['x-keyrelay-error']).toBeUndefined();
    expect(JSON.parse(r.body)).toEqual({
      error: { message: 'fake refusal 401', type: 'invalid_request_error', code: 'fake_refused' },
    });
    const r429 = await mustRefuse(viaKeyrelay(RT, { 'x-fake-ws-refuse': '429' }));
    expect(r429.status).toBe(429);
  });
});

describe('refusals before the upgrade', () => {
  async function refused(
    path: string,
    headers: Record<string, string>,
    status: number,
    code: string,
    protocols?: string[],
  ) {
    const before = h.openai.ws.connections.length;
    const r = await mustRefuse(openWs(wsUrl(h.url, '/'), { rawPath: path, headers, protocols }));
    expect(r.status).toBe(status);
    expect(r.headers['x-keyrelay-error']).toBe(code);
    expect(JSON.parse(r.body)).toMatchObject({ error: { type: 'keyrelay_error', code } });
    expect(h.openai.ws.connections.length).toBe(before); // nothing went upstream
    return r;
  }

  it('missing, malformed, unknown and doubled keys', async () => {
    await refused(RT, { authorization: AUTH }, 401, 'proxy_key_missing');
    await refused(RT, { 'proxy-api-key': 'kr_nope' }, 401, 'proxy_key_invalid');
    // Another last character, so the checksum fails (a key that already ends in x stayed valid: 1 in 62).
    const altered = key.slice(0, -1) + (key.endsWith('x') ? 'y' : 'x');
    await refused(RT, {}, 401, 'proxy_key_invalid', [`keyrelay-key.${altered}`]);
    const unknown = `kr_${'1'.repeat(43)}`;
    await refused(RT, { 'proxy-api-key': unknown + 'AAAAAA' }, 401, 'proxy_key_invalid');
    await refused(RT, { 'proxy-api-key': key }, 400, 'proxy_bad_request', [`keyrelay-key.${key}`]);
  });

  it('a malformed subprotocol list', async () => {
    const r = await mustRefuse(
      openWs(wsUrl(h.url, '/'), {
        rawPath: RT,
        headers: { 'proxy-api-key': key, 'Sec-WebSocket-Protocol': 'realtime, bad proto' },
      }),
    );
    expect(r.status).toBe(400);
    expect(r.headers['x-keyrelay-error']).toBe('proxy_bad_request');
  });

  it('bad paths and unknown providers', async () => {
    await refused('/api/proxy/openai/v1/%2e%2e/admin', { 'proxy-api-key': key }, 400, 'proxy_bad_request');
    await refused('/api/proxy/openai//evil.example/v1', { 'proxy-api-key': key }, 400, 'proxy_bad_request');
    await refused('/api/proxy/nope/v1/realtime', { 'proxy-api-key': key }, 404, 'proxy_unknown_provider');
  });

  it('a revoked key, and a key not allowed the model', async () => {
    const u = await h.newUser();
    const { revokeKey, setKeyLimits } = await import('../src/keys/actions.js');
    const deps = { store: h.kr.services.configStore, bus: h.kr.services.bus };
    await setKeyLimits(deps, null, u.keyId, { allowed_models: ['gpt-4o-mini'] });
    await refused(RT, { 'proxy-api-key': u.key }, 403, 'proxy_key_forbidden');
    await revokeKey(deps, null, u.keyId);
    await refused(RT, { 'proxy-api-key': u.key }, 401, 'proxy_key_revoked');
    await h.flushLog();
    const rows = await h.kr.services.logStore.listRequests({ account_id: u.accountId }, { limit: 10 });
    expect(rows.items.map((r) => [r.status, r.outcome, r.error_code])).toEqual([
      [401, 'refused', 'proxy_key_revoked'],
      [403, 'refused', 'proxy_key_forbidden'],
    ]);
  });
});

describe('messages', () => {
  let c: WsClient;
  beforeAll(async () => {
    c = await mustOpen(viaKeyrelay('/api/proxy/openai/v1/realtime?model=gpt-realtime&echo=1'));
    await c.waitFor((e) => e.type === 'session.created');
  });
  afterAll(() => c.ws.terminate());

  it('text and binary pass unchanged both ways, binary stays binary', async () => {
    const up = lastConn();
    const text = 'plain text, not JSON ✓ \u0000';
    const bin = Buffer.from([0, 1, 2, 255, 254, 0x80, 0xc3]);
    const start = c.messages.length;
    c.ws.send(text);
    c.ws.send(bin);
    await until(() => c.messages.length >= start + 2);
    expect(up.received.slice(-2).map((m) => [m.data.toString('hex'), m.binary])).toEqual([
      [Buffer.from(text).toString('hex'), false],
      [bin.toString('hex'), true],
    ]);
    expect(c.messages.slice(start).map((m) => [m.data.toString('hex'), m.binary])).toEqual([
      [Buffer.from(text).toString('hex'), false],
      [bin.toString('hex'), true],
    ]);
  });

  it('fragmented messages arrive whole, both ways', async () => {
    const up = lastConn();
    const start = c.messages.length;
    // Caller → upstream in three frames.
    c.ws.send('frag-', { fin: false });
    c.ws.send('ment-', { fin: false });
    c.ws.send('ed', { fin: true });
    await until(() => up.received.some((m) => m.data.toString() === 'frag-ment-ed'));
    // Upstream → caller in three frames.
    c.ws.send(JSON.stringify({ type: 'fake.fragmented', parts: ['one ', 'two ', 'three'] }));
    await until(() => c.messages.some((m) => m.data.toString() === 'one two three'));
    expect(c.messages.length).toBeGreaterThan(start);
  });

  it('pings and pongs pass end to end, each way', async () => {
    const up = lastConn();
    const pong = new Promise<Buffer>((r) => c.ws.once('pong', r));
    c.ws.ping(Buffer.from('caller-ping'));
    expect((await pong).toString()).toBe('caller-ping');
    expect(up.pings.map(String)).toContain('caller-ping');
    const ping = new Promise<Buffer>((r) => c.ws.once('ping', r));
    c.ws.send(JSON.stringify({ type: 'fake.ping', data: 'upstream-ping' }));
    expect((await ping).toString()).toBe('upstream-ping');
    await until(() => up.pongs.map(String).includes('upstream-ping'));
  });
});

describe('closing', () => {
  it('passes close codes and reasons caller → upstream', async () => {
    const c = await mustOpen(viaKeyrelay());
    const up = lastConn();
    c.ws.close(4000, 'caller done ✓');
    await until(() => up.closed !== undefined);
    expect(up.closed).toMatchObject({ code: 4000, reason: 'caller done ✓' });
    expect((await c.closed).code).toBe(4000);
  });

  it('passes close codes and reasons upstream → caller', async () => {
    const c = await mustOpen(viaKeyrelay());
    c.ws.send(JSON.stringify({ type: 'fake.close', code: 4001, reason: 'upstream says bye' }));
    expect(await c.closed).toMatchObject({ code: 4001, reason: 'upstream says bye' });
    const c2 = await mustOpen(viaKeyrelay());
    c2.ws.send(JSON.stringify({ type: 'fake.close', code: 1000, reason: '' }));
    expect((await c2.closed).code).toBe(1000);
  });

  it('an upstream drop ends the caller abnormally (1011), never a clean 1000', async () => {
    const c = await mustOpen(viaKeyrelay());
    c.ws.send(JSON.stringify({ type: 'fake.drop' }));
    const end = await c.closed;
    expect(end.code).toBe(1011);
    expect(end.reason).toMatch(/upstream/);
  });

  it('a caller that leaves during the upstream handshake abandons it, and is logged', async () => {
    const u = await h.newUser();
    const before = h.openai.ws.abandoned.length;
    const ws = new WebSocket(wsUrl(h.url, RT), {
      headers: { 'proxy-api-key': u.key, authorization: AUTH, 'x-fake-ws-delay-ms': '300' },
    });
    ws.on('error', () => {});
    await new Promise((r) => setTimeout(r, 100));
    ws.terminate(); // drops the TCP connection while keyrelay waits for upstream
    await until(() => h.openai.ws.abandoned.length > before, 3000);
    let row;
    for (let i = 0; i < 100 && !row; i++) {
      await h.flushLog();
      row = (await h.kr.services.logStore.listRequests({ account_id: u.accountId }, { limit: 5 })).items[0];
      if (!row) await new Promise((r) => setTimeout(r, 20));
    }
    expect(row).toMatchObject({ method: 'GET', status: 0, outcome: 'client_aborted' });
  });

  it('a caller that goes away closes upstream within 100 ms', async () => {
    const c = await mustOpen(viaKeyrelay());
    const up = lastConn();
    await until(() => up.socket.readyState === 1);
    const cutAt = Date.now();
    c.ws.terminate();
    await until(() => up.closed !== undefined);
    expect(up.closed!.at - cutAt).toBeLessThan(100);
    expect(up.closed!.code).toBe(1001);
  });
});

describe('requests with an Upgrade header that are not WebSocket handshakes', () => {
  it('are served as plain requests (curl --http2 sends Upgrade: h2c), body included', async () => {
    const get = await rawExchange(
      h.kr.port,
      rawHead('GET /api/proxy/openai/v1/models HTTP/1.1', [
        'Host: keyrelay.test',
        `proxy-api-key: ${key}`,
        'Connection: Upgrade, HTTP2-Settings',
        'Upgrade: h2c',
        'HTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA',
      ]),
    );
    expect(get.status).toBe(200);
    const before = h.openai.requests.length;
    // Large enough to arrive in several reads after the head.
    const body = JSON.stringify({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'h2c ✓'.repeat(50_000) }],
    });
    const post = await rawExchange(
      h.kr.port,
      rawHead('POST /api/proxy/openai/v1/chat/completions HTTP/1.1', [
        'Host: keyrelay.test',
        `proxy-api-key: ${key}`,
        'content-type: application/json',
        `content-length: ${Buffer.byteLength(body)}`,
        'Connection: Upgrade',
        'Upgrade: h2c',
      ]) + body,
    );
    expect(post.status).toBe(200);
    expect(h.openai.requests[before]!.body.toString()).toBe(body);
    const health = await rawExchange(
      h.kr.port,
      rawHead('GET /healthz HTTP/1.1', ['Host: keyrelay.test', 'Connection: Upgrade', 'Upgrade: h2c']),
    );
    expect(health.status).toBe(200);
  });

  it('refuses a duplicate Authorization on a handshake with 400, before anything goes upstream', async () => {
    const before = h.openai.ws.connections.length;
    const r = await mustRefuse(
      openWs(wsUrl(h.url, RT), { headers: { 'proxy-api-key': key, authorization: [AUTH, AUTH] as never } }),
    );
    expect(r.status).toBe(400);
    expect(r.headers['x-keyrelay-error']).toBe('proxy_bad_request');
    expect(h.openai.ws.connections.length).toBe(before);
  });
});
