// The addresses no delivery may reach unless the operator allows them: the special-purpose
// ranges of the IANA registries (private, loopback, link-local, CGNAT, multicast, broadcast,
// reserved, documentation and benchmarking), cloud metadata addresses, and every IPv6 address
// outside global unicast 2000::/3; IPv6 forms that carry an IPv4 address (mapped, NAT64, 6to4)
// are judged by that address. Each refusal names its range and says what it is, for the error.
//
// Ranges are matched with node:net BlockList, whose IPv4 rules also match the IPv4-mapped form
// ::ffff:a.b.c.d (documented, and pinned by a test); it does not look inside the other
// embeddings, so those are unpacked here. Pure and immutable: the target guard (target-guard.ts)
// uses it on the main thread and in every delivery worker.
import assert from 'node:assert/strict';
import { BlockList, isIP } from 'node:net';

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

export interface Cidr {
  readonly address: string;
  readonly prefix: number;
  readonly type: 'ipv4' | 'ipv6';
}

/** `address/prefix` or a bare address (a one-address range); a string names the problem. */
export function parseCidr(text: string): Cidr | string {
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
export interface Refusal {
  readonly fact: string;
  readonly rule: string;
}

const ruleRefusal = (rule: Rule): Refusal => ({ fact: `is ${rule.kind} (${rule.cidr})`, rule: rule.cidr });

/**
 * Why `address` (an IP literal) is refused by the built-in ranges, or undefined when it is not;
 * `allowLoopback` lets loopback through (never an IPv4 loopback reached through an embedding).
 */
export function specialRangeRefusal(address: string, allowLoopback: boolean): Refusal | undefined {
  const type = isIP(address) === 4 ? 'ipv4' : 'ipv6';
  if (type === 'ipv4' || ipv4Mapped.check(address, 'ipv6')) {
    const rule = firstMatch(ipv4Compiled, address, type);
    return rule === undefined || (rule.loopback === true && allowLoopback) ? undefined : ruleRefusal(rule);
  }
  const rule = firstMatch(ipv6Compiled, address, 'ipv6');
  if (rule !== undefined) return rule.loopback === true && allowLoopback ? undefined : ruleRefusal(rule);
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
