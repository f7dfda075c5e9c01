import assert from 'node:assert/strict';
import { once } from 'node:events';
import { BlockList, connect, createServer, type Server } from 'node:net';
import { after, before, test } from 'node:test';
import { isFermataError } from '../../engine/errors.ts';
import { type Resolver, TargetAllowEntryError, TargetGuard } from '../../dispatch/target-guard.ts';

/** Names the tests resolve, instead of DNS. */
const names: Record<string, readonly string[]> = {
  'loopback.test': ['127.0.0.1'],
  'loopback6.test': ['::1'],
  'loopback-mapped.test': ['::ffff:127.0.0.1'],
  'zero.test': ['0.0.0.0'],
  'unspecified6.test': ['::'],
  'metadata.test': ['169.254.169.254'],
  'metadata6.test': ['fd00:ec2::254'],
  'private.test': ['10.0.0.1'],
  'mixed.test': ['93.184.215.14', '10.0.0.1'],
  'mixed-late.test': ['93.184.215.14', '2606:4700::1111', '127.0.0.1'],
  'mixed6.test': ['2606:4700::1111', 'fe80::1'],
  'nat64.test': ['64:ff9b::7f00:1'],
  'garbage.test': ['not-an-address'],
  'public.test': ['93.184.215.14', '2606:4700::1111'],
  'hooks.internal.example': ['10.9.9.9'],
};

const family = (address: string): 4 | 6 => (address.includes(':') ? 6 : 4);

function fakeResolver(): { resolve: Resolver; calls: string[] } {
  const calls: string[] = [];
  const resolve: Resolver = async (host) => {
    calls.push(host);
    const answers = names[host];
    if (answers === undefined) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    return answers.map((address) => ({ address, family: family(address) }));
  };
  return { resolve, calls };
}

// At least 60 targets that must all be refused with the default configuration.
const refusedTargets = [
  // private
  'http://10.0.0.1/', 'http://10.255.255.255/', 'http://172.16.0.1/', 'http://172.31.255.254/', 'http://192.168.0.1/', 'https://192.168.255.255:8443/x',
  // loopback
  'http://127.0.0.1/', 'http://127.0.0.2/', 'http://127.255.255.254/', 'http://[::1]/', 'http://[0:0:0:0:0:0:0:1]/',
  // odd IPv4 spellings of loopback, private and metadata addresses
  'http://127.1/', 'http://0x7f000001/', 'http://2130706433/', 'http://0177.0.0.1/', 'http://0x7f.0.0.1/', 'http://017700000001/',
  'http://127.000.000.001/', 'http://127.0.0.1./', 'http://%31%32%37.0.0.1/', 'http://\uFF11\uFF12\uFF17.0.0.1/',
  'http://0x0a000001/', 'http://3232235777/', 'http://0xa9fea9fe/',
  // "this network" and unspecified (Linux connects them to the local host)
  'http://0/', 'http://0.0.0.0/', 'http://0.1.2.3/', 'http://[::]/',
  // link-local
  'http://169.254.0.1/', 'http://169.254.255.254/', 'http://[fe80::1]/', 'http://[febf::1]/',
  // cloud metadata, IPv4 and IPv6
  'http://169.254.169.254/latest/meta-data/', 'http://169.254.170.2/', 'http://100.100.100.200/', 'http://168.63.129.16/', 'http://192.0.0.192/',
  'http://[fd00:ec2::254]/', 'http://[fd20:ce::254]/',
  // CGNAT, multicast, broadcast, reserved, benchmarking, documentation
  'http://100.64.0.1/', 'http://100.127.255.254/', 'http://224.0.0.1/', 'http://239.255.255.250/', 'http://[ff02::1]/', 'http://[ff05::2]/',
  'http://255.255.255.255/', 'http://240.0.0.1/', 'http://198.18.0.1/', 'http://198.19.255.254/', 'http://192.0.2.1/', 'http://198.51.100.1/',
  'http://203.0.113.1/', 'http://192.0.0.8/', 'http://192.88.99.1/', 'http://[2001:db8::1]/', 'http://[3fff::1]/', 'http://[2001:2::1]/',
  // IPv6 private and special ranges
  'http://[fc00::1]/', 'http://[fd12:3456::1]/', 'http://[fec0::1]/', 'http://[100::1]/', 'http://[2001:10::1]/', 'http://[5f00::1]/', 'http://[4000::1]/',
  // IPv4-mapped, -compatible and -translated
  'http://[::ffff:127.0.0.1]/', 'http://[::ffff:7f00:1]/', 'http://[0:0:0:0:0:ffff:10.0.0.1]/', 'http://[::ffff:169.254.169.254]/',
  'http://[::ffff:192.168.1.1]/', 'http://[::127.0.0.1]/', 'http://[::10.0.0.1]/', 'http://[::8.8.8.8]/', 'http://[::ffff:0:7f00:1]/',
  // NAT64, 6to4, Teredo
  'http://[64:ff9b::127.0.0.1]/', 'http://[64:ff9b::a9fe:a9fe]/', 'http://[64:ff9b::10.0.0.1]/', 'http://[64:ff9b:1::808:808]/',
  'http://[2002:7f00:1::]/', 'http://[2002:a00:1::1]/', 'http://[2002:a9fe:a9fe::]/', 'http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/',
  // names whose answers are refused, whole or in part
  'http://loopback.test/', 'http://loopback6.test/', 'http://loopback-mapped.test/', 'http://zero.test/', 'http://unspecified6.test/',
  'http://metadata.test/', 'http://metadata6.test/', 'http://private.test/', 'https://mixed.test/', 'https://mixed-late.test/',
  'https://mixed6.test/', 'http://nat64.test/', 'http://garbage.test/',
];

const isName = (target: string): boolean => /^[a-z0-9.-]+\.test$/.test(new URL(target).hostname);

/** A loopback listener on 127.0.0.1 and, where the host has IPv6, on ::1 at the same port: it
 * counts every connection that reaches it. */
interface Sink {
  port: number;
  servers: Server[];
  connections: number;
  /** The client-side port of every connection seen, to know when a given one has arrived. */
  clientPorts: Set<number>;
}

const sink: Sink = { port: 0, servers: [], connections: 0, clientPorts: new Set() };

async function listen(host: string, port: number): Promise<Server | undefined> {
  const server = createServer((socket) => {
    sink.connections++;
    if (socket.remotePort !== undefined) sink.clientPorts.add(socket.remotePort);
    socket.destroy();
  });
  server.listen({ host, port, ipv6Only: host === '::1' });
  const outcome = await Promise.race([once(server, 'listening').then(() => 'listening'), once(server, 'error').then(() => 'error')]);
  return outcome === 'listening' ? server : undefined;
}

before(async () => {
  const v4 = await listen('127.0.0.1', 0);
  assert.ok(v4 !== undefined, 'a loopback listener');
  const address = v4.address();
  assert.ok(address !== null && typeof address === 'object');
  sink.port = address.port;
  sink.servers.push(v4);
  const v6 = await listen('::1', sink.port);
  if (v6 !== undefined) sink.servers.push(v6);
});

after(() => {
  for (const server of sink.servers) server.close();
});

interface Connected {
  readonly remoteAddress: string;
  readonly localPort: number;
}

/** Opens a TCP connection to `address` at the sink's port; settles on connect, error or after a
 * bound (a target that slipped through to a real network must not hang the test). */
function attemptConnection(address: string, port: number): Promise<Connected | undefined> {
  return new Promise((resolve) => {
    const socket = connect({ host: address, port });
    socket.setTimeout(2000, () => socket.destroy());
    socket.once('connect', () => {
      const connected = { remoteAddress: socket.remoteAddress ?? '', localPort: socket.localPort ?? 0 };
      socket.destroy();
      resolve(connected);
    });
    socket.once('error', () => resolve(undefined));
    socket.once('close', () => resolve(undefined));
  });
}

/** Waits until the sink has accepted the connection from `clientPort`; accept order is FIFO, so
 * any connection made to the same listener before it has been counted by then. */
async function sinkSees(clientPort: number): Promise<void> {
  while (!sink.clientPorts.has(clientPort)) await Promise.race(sink.servers.map((server) => once(server, 'connection')));
}

test('BlockList (Node 26): IPv4 rules match the IPv4-mapped form and no other embedding; IPv6 rules over ::ffff:0:0/96 match plain IPv4', () => {
  const loopback = new BlockList();
  loopback.addSubnet('127.0.0.0', 8, 'ipv4');
  assert.ok(loopback.check('::ffff:127.0.0.1', 'ipv6'));
  assert.ok(loopback.check('::ffff:7f00:1', 'ipv6'));
  assert.ok(loopback.check('0:0:0:0:0:FFFF:7F00:1', 'ipv6'));
  // These the guard unpacks itself (or refuses by range).
  assert.equal(loopback.check('::127.0.0.1', 'ipv6'), false);
  assert.equal(loopback.check('64:ff9b::7f00:1', 'ipv6'), false);
  assert.equal(loopback.check('2002:7f00:1::', 'ipv6'), false);
  assert.equal(loopback.check('::ffff:0:7f00:1', 'ipv6'), false);
  // Why no refusal rule of the guard's may cover ::ffff:0:0/96.
  const wide = new BlockList();
  wide.addSubnet('::', 8, 'ipv6');
  assert.ok(wide.check('93.184.215.14', 'ipv4'));
});

test('odd IPv4 spellings reach the guard as dotted quads, and each is refused at admit', () => {
  const guard = new TargetGuard();
  const spellings: Record<string, string> = {
    '127.1': '127.0.0.1', '0x7f000001': '127.0.0.1', '2130706433': '127.0.0.1', '0177.0.0.1': '127.0.0.1', '0x7f.0.0.1': '127.0.0.1',
    '017700000001': '127.0.0.1', '127.000.000.001': '127.0.0.1', '127.0.0.1.': '127.0.0.1', '%31%32%37.0.0.1': '127.0.0.1',
    '\uFF11\uFF12\uFF17.0.0.1': '127.0.0.1', '0': '0.0.0.0', '0x0a000001': '10.0.0.1', '3232235777': '192.168.1.1', '0xa9fea9fe': '169.254.169.254',
    '[::ffff:127.0.0.1]': '[::ffff:7f00:1]', '[0:0:0:0:0:ffff:7f00:1]': '[::ffff:7f00:1]', '[::127.0.0.1]': '[::7f00:1]',
  };
  for (const [written, hostname] of Object.entries(spellings)) {
    assert.equal(new URL(`http://${written}/`).hostname, hostname, written);
    const reason = guard.checkTargetAtAdmit(`http://${written}/`);
    assert.ok(reason !== undefined && reason.includes(hostname.replace(/^\[|\]$/g, '')), `${written}: ${reason}`);
  }
});

test(`an SSRF matrix of ${refusedTargets.length} targets: every one refused, and 0 connections reach a loopback listener`, async () => {
  assert.ok(refusedTargets.length >= 60);
  const { resolve } = fakeResolver();
  const guard = new TargetGuard({ resolve });
  sink.connections = 0;
  const passed: string[] = [];
  const otherErrors: string[] = [];
  for (const target of refusedTargets) {
    let resolved;
    try {
      resolved = await guard.resolveTarget(new URL(target));
    } catch (err) {
      if (!isFermataError(err, 'TARGET_REFUSED')) otherErrors.push(`${target}: ${String(err)}`);
      continue;
    }
    // The guarded path: connect only to what the guard returned.
    passed.push(`${target} → ${resolved.address}`);
    await attemptConnection(resolved.address, sink.port);
  }
  // Canaries: the same path with loopback allowed does connect, once per listener; the listener
  // sees them after anything the matrix sent it (accept order is FIFO).
  const permissive = new TargetGuard({ resolve, allowLoopback: true });
  const canaries = ['http://127.0.0.1/', 'http://[::1]/'].slice(0, sink.servers.length);
  for (const canary of canaries) {
    const resolved = await permissive.resolveTarget(new URL(canary));
    const connected = await attemptConnection(resolved.address, sink.port);
    assert.ok(connected !== undefined, canary);
    await sinkSees(connected.localPort);
  }
  const matrixConnections = sink.connections - canaries.length;
  assert.equal(matrixConnections, 0, `connections from the matrix reached the loopback listener; passed: ${passed.join(', ')}`);
  assert.deepEqual(passed, [], 'every target refused');
  assert.deepEqual(otherErrors, [], 'refused as TARGET_REFUSED, not by another error');
});

test('literal-address targets of the matrix are refused already at admit; names pass admit and are checked at delivery', () => {
  const guard = new TargetGuard();
  for (const target of refusedTargets) {
    const reason = guard.checkTargetAtAdmit(target);
    if (isName(target)) assert.equal(reason, undefined, target);
    else assert.match(reason ?? '', /^target \S+ (is|embeds) .*; allow it in dispatch\.allow$/, target);
  }
  assert.equal(guard.checkTargetAtAdmit('http://10.0.0.1/'), 'target 10.0.0.1 is a private address (10.0.0.0/8); allow it in dispatch.allow');
  assert.equal(
    guard.checkTargetAtAdmit('http://[64:ff9b::a9fe:a9fe]/'),
    'target 64:ff9b::a9fe:a9fe embeds 169.254.169.254 (NAT64, 64:ff9b::/96), which is the metadata address of AWS, GCP, Azure, OpenStack and others (169.254.169.254/32); allow it in dispatch.allow',
  );
  assert.equal(guard.checkTargetAtAdmit('not a url'), undefined, 'the batch validator names that');
});

test('a refusal names the most specific rule, not only the range around it', () => {
  const guard = new TargetGuard();
  const ruleOf: Record<string, string> = {
    'http://169.254.169.254/': '169.254.169.254/32',
    'http://169.254.170.2/': '169.254.170.2/32',
    'http://100.100.100.200/': '100.100.100.200/32',
    'http://168.63.129.16/': '168.63.129.16/32',
    'http://192.0.0.192/': '192.0.0.192/32',
    'http://[fd00:ec2::254]/': 'fd00:ec2::254/128',
    'http://[fd20:ce::254]/': 'fd20:ce::254/128',
    'http://255.255.255.255/': '255.255.255.255/32',
    'http://[::]/': '::/128',
    'http://[::1]/': '::1/128',
    'http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/': '2001::/32',
    'http://[2001:2::1]/': '2001:2::/48',
    'http://[2001:db8::1]/': '2001:db8::/32',
    'http://[64:ff9b:1::808:808]/': '64:ff9b:1::/48',
    'http://[::ffff:0:7f00:1]/': '::ffff:0:0:0/96',
    'http://[::8.8.8.8]/': '::/96',
    'http://[fc00::1]/': 'fc00::/7',
    'http://[5f00::1]/': 'outside 2000::/3',
    'http://[2002:a9fe:a9fe::]/': '169.254.169.254/32',
  };
  for (const [target, rule] of Object.entries(ruleOf)) assert.ok(guard.checkTargetAtAdmit(target)?.includes(`(${rule})`), `${target}: ${guard.checkTargetAtAdmit(target)}`);
});

test('a refusal at delivery names the target, the refused answer and the rule; a mixed answer is refused whole', async () => {
  const guard = new TargetGuard({ resolve: fakeResolver().resolve });
  await assert.rejects(guard.resolveTarget(new URL('https://mixed-late.test/hook')), (err: unknown) => {
    assert.ok(isFermataError(err, 'TARGET_REFUSED'));
    assert.equal(err.message, 'target mixed-late.test resolves to 127.0.0.1, which is a loopback address (127.0.0.0/8); allow it in dispatch.allow');
    assert.deepEqual(err.details, { target: 'https://mixed-late.test/hook', address: '127.0.0.1', rule: '127.0.0.0/8' });
    return true;
  });
  await assert.rejects(guard.resolveTarget(new URL('http://garbage.test/')), /resolves to "not-an-address", which is not an IP address/);
});

test('allowed: public addresses and public IPv4 behind the mapped, NAT64 and 6to4 forms', async () => {
  const { resolve, calls } = fakeResolver();
  const guard = new TargetGuard({ resolve });
  for (const target of ['http://93.184.215.14/', 'https://[2606:4700::1111]/', 'http://[::ffff:93.184.215.14]/', 'http://[64:ff9b::5db8:d70e]/', 'http://[2002:5db8:d70e::1]/', 'http://8.8.8.8/']) {
    assert.equal(guard.checkTargetAtAdmit(target), undefined, target);
    const resolved = await guard.resolveTarget(new URL(target));
    assert.equal(resolved.address, new URL(target).hostname.replace(/^\[|\]$/g, ''), target);
    assert.equal(resolved.servername, undefined, 'no SNI for an IP literal');
  }
  assert.deepEqual(calls, [], 'literal addresses resolve without DNS');
  const named = await guard.resolveTarget(new URL('https://public.test/hook'));
  assert.deepEqual(named, {
    address: '93.184.215.14',
    family: 4,
    port: 443,
    addresses: [{ address: '93.184.215.14', family: 4 }, { address: '2606:4700::1111', family: 6 }],
    servername: 'public.test',
    authority: 'public.test',
  });
  const withPort = await guard.resolveTarget(new URL('http://[2606:4700::1111]:8080/'));
  assert.deepEqual([withPort.port, withPort.family, withPort.authority], [8080, 6, '[2606:4700::1111]:8080']);
  assert.equal((await guard.resolveTarget(new URL('http://93.184.215.14/'))).port, 80);
});

test('allowed: an allow-listed CIDR lets its addresses through and nothing beside them', async () => {
  const guard = new TargetGuard({ allow: ['10.1.0.0/16', 'fd00::/8', '192.168.7.7'], resolve: fakeResolver().resolve });
  for (const target of ['http://10.1.2.3/', 'http://10.1.255.255/', 'http://[::ffff:10.1.0.9]/', 'http://[fd00::5]/', 'http://[fd00:ec2::254]/', 'http://192.168.7.7/']) {
    assert.equal(guard.checkTargetAtAdmit(target), undefined, target);
    await guard.resolveTarget(new URL(target));
  }
  for (const target of ['http://10.2.0.1/', 'http://10.0.255.255/', 'http://[fc00::1]/', 'http://192.168.7.8/', 'http://127.0.0.1/']) {
    assert.ok(guard.checkTargetAtAdmit(target) !== undefined, target);
    await assert.rejects(guard.resolveTarget(new URL(target)), { code: 'TARGET_REFUSED' }, target);
  }
});

test('allowed: an allow-listed origin passes whatever it resolves to; its scheme and port are part of it', async () => {
  const guard = new TargetGuard({ allow: ['https://hooks.internal.example:443', 'http://10.5.5.5:8080'], resolve: fakeResolver().resolve });
  const resolved = await guard.resolveTarget(new URL('https://hooks.internal.example/deliver'));
  assert.equal(resolved.address, '10.9.9.9');
  assert.equal(guard.checkConnectedAddress('10.9.9.9', 'https://hooks.internal.example'), undefined);
  assert.ok(guard.checkConnectedAddress('10.9.9.9') !== undefined, 'the origin is what allows it, not the address');
  await assert.rejects(guard.resolveTarget(new URL('http://hooks.internal.example/')), { code: 'TARGET_REFUSED' });
  await assert.rejects(guard.resolveTarget(new URL('https://hooks.internal.example:8443/')), { code: 'TARGET_REFUSED' });
  assert.equal(guard.checkTargetAtAdmit('http://10.5.5.5:8080/x'), undefined);
  assert.ok(guard.checkTargetAtAdmit('http://10.5.5.5/x') !== undefined);
  assert.ok(guard.checkTargetAtAdmit('https://10.5.5.5:8080/x') !== undefined);
});

test('allowed: loopback when allowLoopback is set, and only loopback', async () => {
  const { resolve } = fakeResolver();
  const guard = new TargetGuard({ allowLoopback: true, resolve });
  for (const target of ['http://127.0.0.1:7070/', 'http://127.1/', 'http://[::1]/', 'http://[::ffff:127.0.0.1]/', 'http://loopback.test/', 'http://loopback6.test/']) {
    assert.equal(guard.checkTargetAtAdmit(target), undefined, target);
    await guard.resolveTarget(new URL(target));
  }
  // A translator never reaches this host's loopback, and 0.0.0.0 / :: are not loopback.
  for (const target of ['http://0.0.0.0/', 'http://[::]/', 'http://[64:ff9b::7f00:1]/', 'http://[2002:7f00:1::]/', 'http://[::127.0.0.1]/', 'http://10.0.0.1/']) {
    assert.ok(guard.checkTargetAtAdmit(target) !== undefined, target);
  }
});

test('the system resolver: localhost is refused unless loopback is allowed', async () => {
  await assert.rejects(new TargetGuard().resolveTarget(new URL('http://localhost:7070/')), { code: 'TARGET_REFUSED' });
  const resolved = await new TargetGuard({ allowLoopback: true }).resolveTarget(new URL('http://localhost:7070/'));
  assert.ok(resolved.address === '::1' || resolved.address.startsWith('127.'), resolved.address);
  assert.equal(resolved.servername, 'localhost');
});

test('each delivery resolves afresh: a name rebinding from public to loopback is refused on the attempt that sees it', async () => {
  let call = 0;
  const guard = new TargetGuard({ resolve: async () => [{ address: call++ === 0 ? '93.184.215.14' : '127.0.0.1', family: 4 }] });
  assert.equal((await guard.resolveTarget(new URL('https://rebind.test/'))).address, '93.184.215.14');
  await assert.rejects(guard.resolveTarget(new URL('https://rebind.test/')), { code: 'TARGET_REFUSED' });
});

test('a lookup failure is the resolver\'s own error (retried as a network error), not a refusal', async () => {
  const guard = new TargetGuard({ resolve: fakeResolver().resolve });
  await assert.rejects(guard.resolveTarget(new URL('https://unknown.test/')), { code: 'ENOTFOUND' });
  const empty = new TargetGuard({ resolve: async () => [] });
  await assert.rejects(empty.resolveTarget(new URL('https://empty.test/')), { code: 'ENOTFOUND' });
});

test('after connect: the socket\'s real peer address is checked', async () => {
  const connected = await attemptConnection('127.0.0.1', sink.port);
  assert.ok(connected !== undefined);
  await sinkSees(connected.localPort);
  const remote = connected.remoteAddress;
  assert.equal(remote, '127.0.0.1');
  assert.match(new TargetGuard().checkConnectedAddress(remote) ?? '', /^connected to 127\.0\.0\.1, which is a loopback address \(127\.0\.0\.0\/8\)/);
  assert.equal(new TargetGuard({ allowLoopback: true }).checkConnectedAddress(remote), undefined);
  assert.ok(new TargetGuard().checkConnectedAddress('::ffff:169.254.169.254') !== undefined, 'a dual-stack socket reports IPv4 peers mapped');
  assert.equal(new TargetGuard().checkConnectedAddress('93.184.215.14'), undefined);
});

test('a malformed allow entry fails construction and names the entry', () => {
  for (const entry of ['nope', '10.0.0.0/33', 'fd00::/129', '10.0.0.0/', '/8', '10.0.0.0/x', '300.1.1.1/8', 'ftp://files.example', 'https://hooks.example/path', 'https://user:pw@hooks.example', 'https://hooks.example?q=1', 'https://']) {
    assert.throws(() => new TargetGuard({ allow: [entry] }), (err: unknown) => {
      assert.ok(err instanceof TargetAllowEntryError, entry);
      assert.equal(err.entry, entry);
      assert.ok(err.message.startsWith(`dispatch.allow entry ${JSON.stringify(entry)}: `), err.message);
      return true;
    });
  }
  assert.doesNotThrow(() => new TargetGuard({ allow: ['10.0.0.0/8', '::1', 'fd00::/8', 'https://hooks.example', 'http://[::1]:8080', 'https://hooks.example/'] }));
});

test('a DNS lookup that never answers fails as a network error after the lookup timeout, not never', async () => {
  const guard = new TargetGuard({ resolve: () => new Promise(() => undefined), lookupTimeoutMs: 50 });
  const started = Date.now();
  await assert.rejects(guard.resolveTarget(new URL('https://silent.example/hook')), (err: unknown) => (err as { code?: string }).code === 'ETIMEOUT' && /took more than 50 ms/.test((err as Error).message));
  assert.ok(Date.now() - started < 5_000);
});

test('admit verdicts are remembered per target text: asked again, or after the memory filled and was cleared, the same answer', () => {
  const guard = new TargetGuard();
  const loopback = new TargetGuard({ allowLoopback: true });
  const refusal = guard.checkTargetAtAdmit('http://127.0.0.1:8080/hook');
  assert.match(refusal ?? '', /127\.0\.0\.1 is a loopback address/);
  // Another guard (other rules) answers for itself, not from the first one's memory.
  assert.equal(loopback.checkTargetAtAdmit('http://127.0.0.1:8080/hook'), undefined);
  assert.equal(guard.checkTargetAtAdmit('http://127.0.0.1:8080/hook'), refusal);
  assert.equal(guard.checkTargetAtAdmit('https://93.184.216.34/x'), undefined);
  // More distinct targets than it remembers: the memory is cleared and answers stay right.
  for (let i = 0; i < 10_050; i++) assert.equal(guard.checkTargetAtAdmit(`https://93.184.216.34/x${i}`), undefined);
  assert.equal(guard.checkTargetAtAdmit('http://127.0.0.1:8080/hook'), refusal);
  assert.equal(guard.checkTargetAtAdmit('https://93.184.216.34/x'), undefined);
});
