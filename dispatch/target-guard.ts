// The SSRF guard for delivery targets (DESIGN.md "Security defaults"). fermata POSTs to URLs
// its clients choose, from inside the operator's network: unguarded, a timer could reach the
// cloud metadata service, a database on 10/8 or the host's own loopback. Refused by default:
// private, loopback, link-local, CGNAT, multicast, broadcast, reserved, documentation and
// benchmarking ranges, cloud metadata addresses, and every IPv6 address outside global unicast
// 2000::/3; IPv6 forms that carry an IPv4 address (mapped, NAT64, 6to4) are judged by that
// address. The operator's allow-list (origins and CIDRs) wins over all of it.
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
// quads by the WHATWG URL parser before any of this runs. Ranges are matched with node:net
// BlockList, whose IPv4 rules also match the IPv4-mapped form ::ffff:a.b.c.d (documented, and
// pinned by a test); it does not look inside the other embeddings, so those are unpacked here.
//
// A TargetGuard is immutable once built and holds no connections: the main thread (admit) and
// each dispatch worker (delivery) build their own from the same config.
import assert from 'node:assert/strict';
import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';
import { errorCodes, FermataError } from '../engine/errors.ts';
import { dispatchLimits } from '../engine/limits.ts';

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

interface Rule {
  readonly cidr: string;
  readonly kind: string;
  /** Let through when the guard allows loopback. */
  readonly loopback?: true;
}

// First match names the refusal, so specific entries (metadata, broadcast) precede the
// ranges that contain them.
const ipv4Rules: readonly Rule[] = [
  { cidr: '169.254.169.254/32', kind: 'the metadata address of AWS, GCP, Azure, OpenStack and others' },
  { cidr: '169.254.170.2/32', kind: 'the AWS ECS task metadata address' },
  { cidr: '100.100.100.200/32', kind: 'the Alibaba Cloud metadata address' },
  { cidr: '168.63.129.16/32', kind: 'the Azure WireServer address' },
  { cidr: '192.0.0.192/32', kind: 'the Oracle Cloud metadata address' },
  { cidr: '255.255.255.255/32', kind: 'the broadcast address' },
  // Linux connects 0.0.0.0 (and ::) to the local host.
  { cidr: '0.0.0.0/8', kind: 'a "this network" address' },
  { cidr: '10.0.0.0/8', kind: 'a private address' },
  { cidr: '100.64.0.0/10', kind: 'a shared (CGNAT) address' },
  { cidr: '127.0.0.0/8', kind: 'a loopback address', loopback: true },
  { cidr: '169.254.0.0/16', kind: 'a link-local address' },
  { cidr: '172.16.0.0/12', kind: 'a private address' },
  { cidr: '192.0.0.0/24', kind: 'an IETF protocol assignment' },
  { cidr: '192.0.2.0/24', kind: 'a documentation address' },
  { cidr: '192.88.99.0/24', kind: 'a 6to4 relay anycast address' },
  { cidr: '192.168.0.0/16', kind: 'a private address' },
  { cidr: '198.18.0.0/15', kind: 'a benchmarking address' },
  { cidr: '198.51.100.0/24', kind: 'a documentation address' },
  { cidr: '203.0.113.0/24', kind: 'a documentation address' },
  { cidr: '224.0.0.0/4', kind: 'a multicast address' },
  { cidr: '240.0.0.0/4', kind: 'a reserved address' },
];

// None of these may cover ::ffff:0:0/96: BlockList would then match every IPv4 address too.
const ipv6Rules: readonly Rule[] = [
  { cidr: 'fd00:ec2::254/128', kind: 'the AWS metadata address' },
  { cidr: 'fd20:ce::254/128', kind: 'the GCP metadata address' },
  { cidr: '::/128', kind: 'the unspecified address' },
  { cidr: '::1/128', kind: 'a loopback address', loopback: true },
  { cidr: '::/96', kind: 'a deprecated IPv4-compatible address' },
  { cidr: '::ffff:0:0:0/96', kind: 'an IPv4-translated address' },
  { cidr: '64:ff9b:1::/48', kind: 'a local-use NAT64 address' },
  { cidr: '100::/64', kind: 'a discard-only address' },
  { cidr: 'fc00::/7', kind: 'a private unique-local address' },
  { cidr: 'fe80::/10', kind: 'a link-local address' },
  { cidr: 'fec0::/10', kind: 'a deprecated site-local address' },
  { cidr: 'ff00::/8', kind: 'a multicast address' },
  { cidr: '2001::/32', kind: 'a Teredo address' },
  { cidr: '2001:2::/48', kind: 'a benchmarking address' },
  { cidr: '2001:db8::/32', kind: 'a documentation address' },
  { cidr: '2001::/23', kind: 'an IETF protocol assignment' },
  { cidr: '3fff::/20', kind: 'a documentation address' },
];

/** IPv6 forms that carry an IPv4 address, judged by it: 16-bit group where the IPv4 starts. */
const embeddings = [
  { cidr: '64:ff9b::/96', via: 'NAT64', group: 6 },
  { cidr: '2002::/16', via: '6to4', group: 1 },
] as const;

interface Cidr {
  readonly address: string;
  readonly prefix: number;
  readonly type: 'ipv4' | 'ipv6';
}

/** `address/prefix` or a bare address (a one-address range); a string names the problem. */
function parseCidr(text: string): Cidr | string {
  const slash = text.indexOf('/');
  const address = slash < 0 ? text : text.slice(0, slash);
  const family = isIP(address);
  if (family === 0) return `${JSON.stringify(address)} is not an IPv4 or IPv6 address`;
  const type = family === 4 ? 'ipv4' : 'ipv6';
  const prefixMax = family === 4 ? 32 : 128;
  if (slash < 0) return { address, prefix: prefixMax, type };
  const prefixText = text.slice(slash + 1);
  const prefix = Number(prefixText);
  if (!/^\d{1,3}$/.test(prefixText) || prefix > prefixMax) return `the prefix length must be a whole number from 0 to ${prefixMax}`;
  return { address, prefix, type };
}

function blockListOf(...cidrs: string[]): BlockList {
  const list = new BlockList();
  for (const cidr of cidrs) {
    const parsed = parseCidr(cidr);
    assert.ok(typeof parsed !== 'string', `built-in range ${cidr}: ${parsed}`);
    list.addSubnet(parsed.address, parsed.prefix, parsed.type);
  }
  return list;
}

interface CompiledRule extends Rule {
  readonly list: BlockList;
}

/** One BlockList per rule, to name the match, and one over them all: most addresses match none. */
interface RuleSet {
  readonly any: BlockList;
  readonly rules: readonly CompiledRule[];
}

const compile = (rules: readonly Rule[]): RuleSet => ({
  any: blockListOf(...rules.map((rule) => rule.cidr)),
  rules: rules.map((rule) => ({ ...rule, list: blockListOf(rule.cidr) })),
});
const ipv4Compiled = compile(ipv4Rules);
const ipv6Compiled = compile(ipv6Rules);
const embeddedCompiled = embeddings.map((embedding) => ({ ...embedding, list: blockListOf(embedding.cidr) }));
const ipv4Mapped = blockListOf('::ffff:0:0/96');
const globalUnicast = blockListOf('2000::/3');

const firstMatch = (set: RuleSet, address: string, type: 'ipv4' | 'ipv6'): CompiledRule | undefined =>
  set.any.check(address, type) ? set.rules.find((rule) => rule.list.check(address, type)) : undefined;

/** The eight 16-bit groups of an IPv6 address, read from the URL parser's canonical form
 * (lowercase hex, one `::`, no dotted tail), so only `::` needs expanding. */
function ipv6Groups(address: string): number[] {
  const canonical = new URL(`http://[${address}]/`).hostname.slice(1, -1);
  const [head = '', tail] = canonical.split('::');
  const groupsOf = (part: string): number[] => (part === '' ? [] : part.split(':').map((hex) => Number.parseInt(hex, 16)));
  const front = groupsOf(head);
  if (tail === undefined) return front;
  const back = groupsOf(tail);
  return [...front, ...new Array<number>(8 - front.length - back.length).fill(0), ...back];
}

function ipv4At(groups: readonly number[], group: number): string {
  const high = groups[group] ?? 0;
  const low = groups[group + 1] ?? 0;
  return `${high >> 8}.${high & 0xff}.${low >> 8}.${low & 0xff}`;
}

/** Why an address is refused, as the end of a sentence: "is a private address (10.0.0.0/8)". */
interface Refusal {
  readonly fact: string;
  readonly rule: string;
}

const ruleRefusal = (rule: Rule): Refusal => ({ fact: `is ${rule.kind} (${rule.cidr})`, rule: rule.cidr });

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
    const type = isIP(address) === 4 ? 'ipv4' : 'ipv6';
    if (this.#allowedRanges.check(address, type)) return undefined;
    if (type === 'ipv4' || ipv4Mapped.check(address, 'ipv6')) {
      const rule = firstMatch(ipv4Compiled, address, type);
      return rule === undefined || (rule.loopback === true && this.#allowLoopback) ? undefined : ruleRefusal(rule);
    }
    const rule = firstMatch(ipv6Compiled, address, 'ipv6');
    if (rule !== undefined) return rule.loopback === true && this.#allowLoopback ? undefined : ruleRefusal(rule);
    const embedding = embeddedCompiled.find((candidate) => candidate.list.check(address, 'ipv6'));
    if (embedding !== undefined) {
      const inner = ipv4At(ipv6Groups(address.split('%')[0] ?? address), embedding.group);
      // The IPv4 address is reached through a translator, never this host: loopback stays refused.
      const innerRule = firstMatch(ipv4Compiled, inner, 'ipv4');
      if (innerRule === undefined) return undefined;
      return { fact: `embeds ${inner} (${embedding.via}, ${embedding.cidr}), which ${ruleRefusal(innerRule).fact}`, rule: innerRule.cidr };
    }
    if (!globalUnicast.check(address, 'ipv6')) return { fact: 'is not a global unicast address (outside 2000::/3)', rule: '2000::/3' };
    return undefined;
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
