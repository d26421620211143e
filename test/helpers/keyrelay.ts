/** Starts a real keyrelay (in this process, on a real socket) against fake upstreams, on a fresh data dir. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createAccount } from '../../src/accounts/create-account.js';
import { loadConfig } from '../../src/config.js';
import { startServer, type RunningServer } from '../../src/server.js';
import { startFakeAnthropic, startFakeOpenAI } from '../fakes/index.js';
import type { FakeUpstream, FakeWs } from '../fakes/index.js';
import { tuned, type Tuning } from './tuning.js';

export interface Harness {
  kr: RunningServer;
  url: string;
  openai: FakeUpstream & { ws: FakeWs };
  anthropic: FakeUpstream;
  dataDir: string;
  /** Creates an account with its default key; returns the full key. */
  newUser(email?: string): Promise<{ key: string; keyId: string; accountId: string }>;
  /** Waits until every queued log row is written. */
  flushLog(): Promise<void>;
  close(): Promise<void>;
}

let counter = 0;

/** `tuning`: internal values no variable sets (test/helpers/tuning.ts), e.g. a short WebSocket idle timeout. */
export async function startHarness(env: Record<string, string> = {}, tuning: Tuning = {}): Promise<Harness> {
  const openai = await startFakeOpenAI();
  const anthropic = await startFakeAnthropic();
  const dataDir = mkdtempSync(join(tmpdir(), 'keyrelay-test-'));
  const config = loadConfig(
    {},
    {
      KEYRELAY_PORT: '0',
      KEYRELAY_DATA_DIR: dataDir,
      KEYRELAY_OPENAI_UPSTREAM: openai.url,
      KEYRELAY_ANTHROPIC_UPSTREAM: anthropic.url,
      KEYRELAY_LOG_LEVEL: 'silent',
      ...env,
    },
  );
  const kr = await startServer(tuned(config, tuning));
  const { configStore, bus, queue } = kr.services;
  return {
    kr,
    url: kr.url,
    openai,
    anthropic,
    dataDir,
    async newUser(email) {
      const { account, key } = await createAccount(
        { store: configStore, bus },
        { email: email ?? `user${++counter}-${Date.now()}@example.com`, password: 'correct horse battery' },
      );
      return { key: key.key, keyId: key.view.id, accountId: account.id };
    },
    async flushLog() {
      // The rows of the responses read so far may be a moment from the queue (RunningServer.settled); a
      // stream the test still holds open is waited for too.
      await kr.settled();
      await queue.flush();
    },
    async close() {
      await kr.stop();
      await openai.close();
      await anthropic.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
