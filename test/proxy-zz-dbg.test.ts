import { connect } from 'node:net';
import { request } from 'undici';
import { it } from 'vitest';
import { startHarness } from './helpers/keyrelay.js';
import { rawExchange, rawHead } from './helpers/raw-http.js';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
it('dbg', async () => {
  const h = await startHarness({ KEYRELAY_MAX_BODY_BYTES: '1000' });
  const { key } = await h.newUser();
  const log = (...a: unknown[]) => process.stderr.write('XX ' + a.map((x) => typeof x === 'string' ? x : JSON.stringify(x)).join(' ') + '\n');
  // upgrade
  const r1 = await rawExchange(h.kr.port, rawHead('GET /api/proxy/openai/v1/models HTTP/1.1', ['Host: x', `proxy-api-key: ${key}`, 'Connection: Upgrade', 'Upgrade: websocket'])).catch((e) => String(e));
  log('upgrade', typeof r1 === 'string' ? r1 : r1.status, h.openai.requests.length, h.openai.requests.at(-1)?.rawHeaders);
  // unknown encoding with injection
  const body = JSON.stringify({ model: 'gpt-4o-mini', messages: [], stream: true });
  const r2 = await request(`${h.url}/api/proxy/openai/v1/chat/completions`, { method: 'POST', headers: { 'proxy-api-key': key, 'x-fake-set-headers': JSON.stringify({ 'content-encoding': 'x-custom' }) }, body });
  log('unknown-enc', r2.statusCode, r2.headers['content-encoding'], (await r2.body.text()).slice(-300));
  // body exactly at limit
  const r3 = await request(`${h.url}/api/proxy/openai/v1/embeddings`, { method: 'POST', headers: { 'proxy-api-key': key }, body: 'x'.repeat(1000) });
  log('limit', r3.statusCode); await r3.body.dump();
  // abort mid-upload
  const n = h.openai.requests.length;
  const s = connect(h.kr.port, '127.0.0.1');
  s.write(rawHead('POST /api/proxy/openai/v1/embeddings HTTP/1.1', ['Host: x', `proxy-api-key: ${key}`, 'Content-Length: 900']) + 'x'.repeat(100));
  await sleep(200); s.destroy(); await sleep(200);
  log('upload-abort', h.openai.requests.length - n);
  // HEAD probes
  for (const p of ['/api/proxy/anthropic', '/api/proxy/anthropic/', '/api/proxy/openai/v1']) {
    const r = await rawExchange(h.kr.port, rawHead(`HEAD ${p} HTTP/1.1`, ['Host: x', 'Connection: close']));
    log('head', p, r.status, r.headers);
  }
  await h.close();
});
