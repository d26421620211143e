/**
 * Where a webhook may point. A rule's URL is chosen by any admin of an organization, and keyrelay then makes
 * requests to it from inside the operator's network: without these checks an alert is a way to reach
 * keyrelay's own API, the cloud metadata service or a database port (server-side request forgery). Loopback,
 * private, link-local and other non-public addresses are refused unless the instance allows them (setting
 * `alerts_allow_private_targets`, `keyrelay settings set`); keyrelay itself is refused always. Checked when a
 * rule is saved and again before every attempt, on every address the name resolves to then; the attempt
 * connects to those checked addresses only (`pinnedLookup`), never to a second answer of the resolver: a
 * name that answers a public address to the check and 127.0.0.1 to the connect (DNS rebinding) reaches
 * nothing it was not checked for.
 */
import { lookup } from 'node:dns/promises';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { networkInterfaces } from 'node:os';
import { DomainError } from '../errors.js';
import type { ConfigStore } from '../store/types.js';

export const ALLOW_PRIVATE_SETTING = 'alerts_allow_private_targets';

/** Whether the operator let webhooks reach loopback and private addresses (an instance setting). */
export async function privateTargetsAllowed(store: Pick<ConfigStore, 'getSetting'>): Promise<boolean> {
  return (await store.getSetting(ALLOW_PRIVATE_SETTING)) === 'true';
}

const NON_PUBLIC = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local, cloud metadata
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const)
  NON_PUBLIC.addSubnet(net, bits, 'ipv4');
for (const [net, bits] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7], // unique local
  ['fe80::', 10], // link-local
  ['ff00::', 8],
] as const)
  NON_PUBLIC.addSubnet(net, bits, 'ipv6');

function isNonPublic(address: string): boolean {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return NON_PUBLIC.check(mapped[1]!, 'ipv4');
  return NON_PUBLIC.check(address, isIP(address) === 6 ? 'ipv6' : 'ipv4');
}

/** This machine's own addresses: a target on one of them, at keyrelay's port, is keyrelay. */
function ownAddresses(): Set<string> {
  const own = new Set(['0.0.0.0', '::', '127.0.0.1', '::1']);
  for (const list of Object.values(networkInterfaces())) for (const a of list ?? []) own.add(a.address);
  return own;
}

/** Resolves a host name to every address it has now (the system resolver's `getaddrinfo`, or a test's). */
export type HostLookup = (host: string) => Promise<string[]>;

export const systemLookup: HostLookup = async (host) =>
  (await lookup(host, { all: true })).map((a) => a.address);

export interface TargetPolicy {
  allowPrivate: boolean;
  lookup?: HostLookup;
  /** keyrelay's public URL and the port it listens on. */
  publicUrl: string;
  port: number;
}

const refuse = (why: string) => new DomainError('alert_target_refused', `Webhook URL refused: ${why}.`);

export interface CheckedTarget {
  url: URL;
  /** What the host resolved to when checked (the host itself when it is an address): all allowed. */
  addresses: string[];
}

/** The URL, parsed and resolved, when a delivery may go there; else throws `alert_target_refused` saying why. */
export async function checkTarget(raw: string, policy: TargetPolicy): Promise<CheckedTarget> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw refuse('not a URL');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw refuse('only http and https');
  if (url.username || url.password) throw refuse('credentials in the URL would be sent in the clear in logs');
  if (url.origin === new URL(policy.publicUrl).origin) throw refuse('it is keyrelay itself');
  const host = url.hostname.replace(/^\[|\]$/g, '');
  let addresses: string[];
  try {
    addresses = isIP(host) ? [host] : await (policy.lookup ?? systemLookup)(host);
  } catch {
    throw refuse(`${host} does not resolve`);
  }
  if (addresses.length === 0) throw refuse(`${host} does not resolve`);
  const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
  const own = ownAddresses();
  if (port === policy.port && addresses.some((a) => own.has(a))) throw refuse('it is keyrelay itself');
  if (!policy.allowPrivate && addresses.some(isNonPublic))
    throw refuse(
      `${host} is a loopback or private address (an operator may allow those: keyrelay settings set ${ALLOW_PRIVATE_SETTING} true)`,
    );
  return { url, addresses };
}

/**
 * A `net.connect` lookup that answers with the checked addresses whatever it is asked: the socket goes where
 * the check looked, while the URL (so the Host header and TLS's server name and certificate check) keeps the
 * name.
 */
export function pinnedLookup(addresses: readonly string[]): LookupFunction {
  const entries = addresses.map((address) => ({ address, family: isIP(address) }));
  return (host, options, callback) => {
    const fit = entries.filter((e) => !options.family || e.family === options.family);
    if (fit.length === 0) {
      const err: NodeJS.ErrnoException = new Error(`no checked IPv${options.family} address for ${host}`);
      err.code = 'ENOTFOUND';
      callback(err, '', 0);
    } else if (options.all) callback(null, fit);
    else callback(null, fit[0]!.address, fit[0]!.family);
  };
}
