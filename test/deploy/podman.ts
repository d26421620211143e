/**
 * podman as this kind of machine allows it: runc with cgroupfs (crun fails on its cgroups), the host's network
 * and explicit ulimits below the machine's hard limits (podman's defaults exceed them). Every failure throws
 * with podman's own output, so a machine where containers cannot run fails the deploy tests loudly.
 */
import { execFile, spawnSync } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const PODMAN_GLOBAL = ['--runtime', 'runc', '--cgroup-manager=cgroupfs'];
export const ULIMITS = ['--ulimit', 'nofile=8192:8192', '--ulimit', 'nproc=4096:4096'];
export const IMAGE = 'localhost/keyrelay:deploy-test';

const run = promisify(execFile);

/** Runs `podman ...args`; resolves with stdout, or throws with the command and its output. */
export async function podman(args: string[], timeoutMs = 120_000): Promise<string> {
  try {
    const { stdout } = await run('podman', [...PODMAN_GLOBAL, ...args], {
      timeout: timeoutMs,
      maxBuffer: 64 * 1024 * 1024,
    });
    return stdout.trim();
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(
      `podman ${args.join(' ')} failed: ${e.message}\n${(e.stdout ?? '').slice(-4000)}\n${(e.stderr ?? '').slice(-4000)}`,
    );
  }
}

/** Fails with a clear message where podman is missing (`.ci/run` installs it from Debian's packages). */
export function requirePodman(): void {
  const probe = spawnSync('podman', ['--version'], { encoding: 'utf8' });
  if (probe.status !== 0) {
    throw new Error(
      'podman is not installed: the container tests cannot run here (apt-get install podman runc mmdebstrap)',
    );
  }
}

/**
 * The local stand-in for node:22-bookworm-slim (test/deploy/base-image.sh: Debian packages and the npm
 * registry, cached under /opt/keyrelay-ci), then keyrelay's Containerfile built on it. Returns build seconds.
 */
export async function buildImage(): Promise<{ base: string; seconds: number }> {
  requirePodman();
  let base: string;
  try {
    const { stdout } = await run('bash', [`${ROOT}/test/deploy/base-image.sh`, '22'], {
      timeout: 1_200_000,
      maxBuffer: 64 * 1024 * 1024,
    });
    base = stdout.trim().split('\n').pop()!;
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(
      `could not make the local Node base image: ${e.message}\n${(e.stderr ?? '').slice(-4000)}`,
    );
  }
  const started = Date.now();
  await podman(
    [
      'build',
      '--format',
      'docker', // HEALTHCHECK is part of the docker image format only
      '--network=host',
      ...ULIMITS,
      '--build-arg',
      `BASE_IMAGE=${base}`,
      '-t',
      IMAGE,
      ROOT,
    ],
    1_500_000,
  );
  return { base, seconds: (Date.now() - started) / 1000 };
}

/** A TCP port free on 127.0.0.1 right now. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
