/**
 * The keyed fingerprint of a provider credential (SPEC: `credential_fingerprint`, never the credential):
 * HMAC-SHA-256 under the install's own secret, so the same credential gives the same fingerprint in every
 * instance and in the CLI, and a fingerprint cannot be tried against guessed credentials without the
 * secret.
 */
import { createHmac } from 'node:crypto';

/** The config-store secret the fingerprints are keyed with. */
export const FINGERPRINT_SECRET = 'credential_fingerprint';

export function credentialFingerprint(key: Buffer, credential: string): string {
  return createHmac('sha256', key).update(credential).digest('hex').slice(0, 32);
}
