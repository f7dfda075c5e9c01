// The SSRF guard for delivery targets (docs/api.md, "Security defaults"). fermata POSTs to URLs
// its clients choose, from inside the operator's network: unguarded, a timer could reach the
// cloud metadata service, a database on 10/8 or the host's own loopback. Refused by default:
// the special-purpose and metadata addresses of special-addresses.ts. The operator's allow-list
// (origins and CIDRs) wins over all of it.
//
// Three checks, one per moment:
//   admit    checkTargetAtAdmit   a literal-address target is refused at once (400); names pass
//   deliver  resolveTarget        every address the name resolves to must pass (a mixed answer is
//                                 refused whole); the caller connects to the returned address and
//                                 never resolves again, so a rebinding answer cannot slip between
//                                 check and connect
//   connect  checkConnectedAddress  the socket's peer, belt and braces
//
// Odd IPv4 spellings (`127.1`, `0x7f000001`, `2130706433`, `0177.0.0.1`) are turned into dotted
// quads by the WHATWG URL parser before any of this runs.
//
// A TargetGuard is immutable once built and holds no connections: the main thread (admit) and
// each dispatch worker (delivery) build their own from the same config.
import assert from 'node:assert/strict';
import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';
import { errorCodes, FermataError } from '../engine/errors.ts';
import { dispatchLimits } from '../engine/limits.ts';
import { parseCidr, type Refusal, specialRangeRefusal } from './special-addresses.ts';

/** Where an operator lets a refused target through (named in every refusal). */
const allowHint = 'allow it in dispatch.allow';
/** What #admitVerdicts holds for a target that passed (a refusal is never empty). */
const passed = '';
/** Add-time verdicts remembered, by target text (a handful of webhooks take most adds), up to this many. */
const admitVerdictsMax = 10_000;

export interface ResolvedAddress {
  readonly address: string;
  readonly family: 4 | 6;
}

/** Resolves a host name to all its addresses (family is re-derived from each address). */
export type Resolver = (host: string) => Promise<ReadonlyArray<{ readonly address: string; readonly family: number }>>;

export interface TargetGuardOptions {
  /** Origins (`https://hooks.example.com:443`) and CIDRs (`10.1.0.0/16`, `fd00::/8`, or one
   * address) let through whatever the defaults say: an origin whatever it resolves to. */
  readonly allow?: readonly string[];
  /** Lets loopback through: set when the server itself listens on loopback (a local setup). */
  readonly allowLoopback?: boolean;
  /** Default: the system resolver (getaddrinfo: hosts file, then DNS), every answer, unsorted. */
  readonly resolve?: Resolver;
  /** A lookup not answered within this fails as a network error (ETIMEOUT), to be retried; default dispatchLimits.dnsLookupTimeoutMs. */
  readonly lookupTimeoutMs?: number;
}

export interface ResolvedTarget {
  /** The address to connect to: an IP literal that passed the guard, never a name. */
  readonly address: string;
  readonly family: 4 | 6;
  readonly port: number;
  /** Every address the host resolved to, in resolver order, each checked: `address` is the
   * first, the rest are fallbacks should it not connect. */
  readonly addresses: readonly ResolvedAddress[];
  /** TLS server name (SNI and certificate check): the URL's host name; undefined for an IP
   * literal, which SNI must not carry. */
  readonly servername: string | undefined;
  /** `:authority` / `Host`: the URL's host as written, with a non-default port. */
  readonly authority: string;
}

/** A malformed `allow` entry, found when the guard is built (config time). */
export class TargetAllowEntryError extends Error {
  readonly entry: string;

  constructor(entry: string, problem: string) {
    super(`dispatch.allow entry ${JSON.stringify(entry)}: ${problem}`);
    this.name = 'TargetAllowEntryError';
    this.entry = entry;
  }
}

/** "[::1]" → "::1": URL keeps IPv6 literals bracketed, BlockList and net.connect want them bare. */
const bareHost = (hostname: string): string => (hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname);

export class TargetGuard {
  readonly #allowedOrigins: ReadonlySet<string>;
  readonly #allowedRanges: BlockList;
  readonly #allowLoopback: boolean;
  readonly #resolve: Resolver;
  readonly #lookupTimeoutMs: number;
  /** checkTargetAtAdmit's answers by target text: a refusal, or `passed`. */
  readonly #admitVerdicts = new Map<string, string>();

  /** Throws TargetAllowEntryError for the first malformed `allow` entry. */
  constructor(options: TargetGuardOptions = {}) {
    const origins = new Set<string>();
    this.#allowedRanges = new BlockList();
    for (const entry of options.allow ?? []) {
      if (entry.includes('://')) origins.add(allowedOrigin(entry));
      else {
        const cidr = parseCidr(entry);
        if (typeof cidr === 'string') throw new TargetAllowEntryError(entry, `${cidr}; an entry is an origin (https://host:port) or a CIDR (10.1.0.0/16, fd00::/8)`);
        this.#allowedRanges.addSubnet(cidr.address, cidr.prefix, cidr.type);
      }
    }
    this.#allowedOrigins = origins;
    this.#allowLoopback = options.allowLoopback ?? false;
    this.#resolve = options.resolve ?? resolveAll;
    this.#lookupTimeoutMs = options.lookupTimeoutMs ?? dispatchLimits.dnsLookupTimeoutMs;
  }

  /**
   * At add time: why a target whose host is a literal address is refused, or undefined.
   * Host names pass here (they are checked at delivery, on what they resolve to then), and so
   * does text that is not a URL (the batch validator names that).
   */
  checkTargetAtAdmit(url: string): string | undefined {
    // The verdict depends on the text and this guard's fixed rules alone: remembered, since
    // parsing the URL and matching the rules cost ~4 us, a tenth of a one-timer HTTP add.
    const known = this.#admitVerdicts.get(url);
    if (known !== undefined) return known === passed ? undefined : known;
    const verdict = this.#admitVerdict(url);
    if (this.#admitVerdicts.size >= admitVerdictsMax) this.#admitVerdicts.clear();
    this.#admitVerdicts.set(url, verdict ?? passed);
    return verdict;
  }

  #admitVerdict(url: string): string | undefined {
    const parsed = URL.parse(url);
    if (parsed === null || this.#allowedOrigins.has(parsed.origin)) return undefined;
    const host = bareHost(parsed.hostname);
    if (isIP(host) === 0) return undefined;
    const refusal = this.#refusal(host);
    return refusal === undefined ? undefined : `target ${host} ${refusal.fact}; ${allowHint}`;
  }

  /**
   * Resolves `host`, bounded in time: getaddrinfo has no timeout of its own, and a resolver that
   * never answers would hold the delivery (and its queue's room) for good. The lookup itself
   * cannot be cancelled; its late answer is dropped.
   */
  async #lookup(host: string): ReturnType<Resolver> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(Object.assign(new Error(`looking up ${host} took more than ${this.#lookupTimeoutMs} ms`), { code: 'ETIMEOUT' })),
        this.#lookupTimeoutMs,
      );
    });
    try {
      return await Promise.race([this.#resolve(host), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * At delivery: the checked address to connect to. A literal address is used as is; a name is
   * resolved and refused if any answer is refused. Throws FermataError TARGET_REFUSED; a failed
   * lookup rejects with the resolver's own error (ENOTFOUND, …), a network error to retry.
   */
  async resolveTarget(url: URL): Promise<ResolvedTarget> {
    assert.ok(url.protocol === 'http:' || url.protocol === 'https:', `target protocol ${url.protocol} passed validation`);
    const host = bareHost(url.hostname);
    const literal = isIP(host) !== 0;
    const answers = literal ? [{ address: host, family: isIP(host) }] : await this.#lookup(host);
    if (answers.length === 0) throw Object.assign(new Error(`target ${host} resolved to no address`), { code: 'ENOTFOUND' });
    const originAllowed = this.#allowedOrigins.has(url.origin);
    const addresses: ResolvedAddress[] = [];
    for (const { address } of answers) {
      const family = isIP(address);
      if (family === 0) throw refused(url, address, 'not an IP address', `target ${host} resolves to ${JSON.stringify(address)}, which is not an IP address`);
      const refusal = originAllowed ? undefined : this.#refusal(address);
      if (refusal !== undefined) {
        const subject = literal ? `target ${host}` : `target ${host} resolves to ${address}, which`;
        throw refused(url, address, refusal.rule, `${subject} ${refusal.fact}; ${allowHint}`);
      }
      addresses.push({ address, family: family === 4 ? 4 : 6 });
    }
    const [first] = addresses as [ResolvedAddress, ...ResolvedAddress[]];
    const port = url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port);
    return { address: first.address, family: first.family, port, addresses, servername: literal ? undefined : host, authority: url.host };
  }

  /**
   * After connect: why the socket's peer (`socket.remoteAddress`) is refused, or undefined.
   * `origin` is the target's origin, so an allow-listed origin passes wherever it led.
   */
  checkConnectedAddress(address: string, origin?: string): string | undefined {
    if (origin !== undefined && this.#allowedOrigins.has(origin)) return undefined;
    if (isIP(address) === 0) return `connected to ${JSON.stringify(address)}, which is not an IP address`;
    const refusal = this.#refusal(address);
    return refusal === undefined ? undefined : `connected to ${address}, which ${refusal.fact}; ${allowHint}`;
  }

  #refusal(address: string): Refusal | undefined {
    if (this.#allowedRanges.check(address, isIP(address) === 4 ? 'ipv4' : 'ipv6')) return undefined;
    return specialRangeRefusal(address, this.#allowLoopback);
  }

}

function allowedOrigin(entry: string): string {
  const url = URL.parse(entry);
  if (url === null) throw new TargetAllowEntryError(entry, 'not a valid URL');
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new TargetAllowEntryError(entry, 'an origin must be http: or https:');
  if (url.username !== '' || url.password !== '') throw new TargetAllowEntryError(entry, 'an origin carries no credentials');
  if (url.pathname !== '/' || url.search !== '' || url.hash !== '') throw new TargetAllowEntryError(entry, 'an origin is scheme://host[:port] only, no path, query or fragment');
  return url.origin;
}

function resolveAll(host: string): Promise<ReadonlyArray<{ readonly address: string; readonly family: number }>> {
  return lookup(host, { all: true, order: 'verbatim' });
}

function refused(url: URL, address: string, rule: string, message: string): FermataError {
  return new FermataError(errorCodes.targetRefused, message, { target: url.href, address, rule });
}
