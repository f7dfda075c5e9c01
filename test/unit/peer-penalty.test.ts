// The penalty table (ingest/http/listen/peer-penalty.ts) on a clock the test moves, and the peer guard
// (ingest/http/listen/peer-guard.ts) that feeds it: which errors are offences, who is never penalised,
// how the warn lines are rate-limited.
import assert from 'node:assert/strict';
import type net from 'node:net';
import { describe, test } from 'node:test';
import { type PeerPenaltyLimits, peerPenaltyLimits } from '../../engine/limits.ts';
import { PeerGuard } from '../../ingest/http/listen/peer-guard.ts';
import { PeerPenalties, peerKey } from '../../ingest/http/listen/peer-penalty.ts';

const limits: PeerPenaltyLimits = {
  offencesBeforePenalty: 3,
  offenceWindowMs: 60_000,
  coolDownMsMin: 10_000,
  coolDownMsMax: 80_000,
  peerMemoryMs: 3_600_000,
  peersMax: 4,
  logLinesPerMinuteMax: 2,
};

function manualClock(startMs = 1_000_000): { now(): number; advance(ms: number): void } {
  let nowMs = startMs;
  return {
    now: () => nowMs,
    advance: (ms: number) => {
      nowMs += ms;
    },
  };
}

function offendTimes(table: PeerPenalties, peer: string, times: number): void {
  for (let i = 0; i < times; i++) table.offend(peer);
}

describe('peerKey', () => {
  test('an IPv4 address is its own key, also when IPv4-mapped', () => {
    assert.equal(peerKey('203.0.113.7'), '203.0.113.7');
    assert.equal(peerKey('::ffff:203.0.113.7'), '203.0.113.7');
    assert.equal(peerKey('::FFFF:127.0.0.2'), '127.0.0.2');
  });

  test('an IPv6 address is its /64, however it is written', () => {
    assert.equal(peerKey('2001:db8:1:2:3:4:5:6'), '2001:db8:1:2::/64');
    assert.equal(peerKey('2001:db8:1:2::9'), '2001:db8:1:2::/64');
    assert.equal(peerKey('2001:0db8:0001:0002:ffff::1%eth0'), '2001:db8:1:2::/64');
    assert.equal(peerKey('2001:db8::1'), '2001:db8:0:0::/64');
    assert.equal(peerKey('::1'), '0:0:0:0::/64');
    assert.equal(peerKey('64:ff9b::192.0.2.1'), '64:ff9b:0:0::/64');
    assert.notEqual(peerKey('2001:db8:1:2::1'), peerKey('2001:db8:1:3::1'));
  });
});

describe('PeerPenalties', () => {
  test('offences below the threshold penalise nobody; the threshold starts the shortest cool-down, which ends', () => {
    const clock = manualClock();
    const table = new PeerPenalties(limits, clock);
    assert.equal(table.offend('192.0.2.1'), undefined);
    assert.equal(table.offend('192.0.2.1'), undefined);
    assert.equal(table.refuses('192.0.2.1'), false);
    const penalty = table.offend('192.0.2.1');
    assert.deepEqual(penalty, { peer: '192.0.2.1', coolDownMs: 10_000, untilMs: clock.now() + 10_000, penalties: 1 });
    assert.equal(table.refuses('192.0.2.1'), true);
    assert.equal(table.refuses('192.0.2.2'), false, 'only the offender');
    clock.advance(9_999);
    assert.equal(table.refuses('192.0.2.1'), true);
    clock.advance(1);
    assert.equal(table.refuses('192.0.2.1'), false, 'served again when the cool-down ends');
    assert.equal(table.refusedUntil('192.0.2.1'), undefined);
  });

  test('offences spread wider than the window never add up to a penalty', () => {
    const clock = manualClock();
    const table = new PeerPenalties(limits, clock);
    for (let i = 0; i < 10; i++) {
      assert.equal(table.offend('192.0.2.1'), undefined);
      clock.advance(limits.offenceWindowMs / 2);
      assert.equal(table.offend('192.0.2.1'), undefined);
      clock.advance(limits.offenceWindowMs);
    }
    assert.equal(table.refuses('192.0.2.1'), false);
    assert.equal(table.size, 0, 'forgotten once its window is over');
  });

  test('a remembered offender is penalised again at its first offence, each cool-down twice the last, up to the maximum', () => {
    const clock = manualClock();
    const table = new PeerPenalties(limits, clock);
    offendTimes(table, '192.0.2.1', 3);
    const coolDowns: number[] = [];
    for (let i = 0; i < 5; i++) {
      const until = table.refusedUntil('192.0.2.1');
      assert.ok(until !== undefined);
      clock.advance(until - clock.now());
      const penalty = table.offend('192.0.2.1');
      assert.ok(penalty !== undefined, `repeat ${i + 1} is penalised at once`);
      coolDowns.push(penalty.coolDownMs);
    }
    assert.deepEqual(coolDowns, [20_000, 40_000, 80_000, 80_000, 80_000]);
  });

  test('offences during a cool-down (connections opened before it) neither extend nor repeat it', () => {
    const clock = manualClock();
    const table = new PeerPenalties(limits, clock);
    offendTimes(table, '192.0.2.1', 3);
    const until = table.refusedUntil('192.0.2.1');
    clock.advance(5_000);
    assert.equal(table.offend('192.0.2.1'), undefined);
    assert.equal(table.refusedUntil('192.0.2.1'), until);
  });

  test('a peer clean for peerMemoryMs after its cool-down is forgotten and starts over', () => {
    const clock = manualClock();
    const table = new PeerPenalties(limits, clock);
    offendTimes(table, '192.0.2.1', 3);
    clock.advance(limits.coolDownMsMin + limits.peerMemoryMs);
    assert.equal(table.refuses('192.0.2.1'), false);
    assert.equal(table.size, 0);
    assert.equal(table.offend('192.0.2.1'), undefined, 'a first offence again');
    offendTimes(table, '192.0.2.1', 1);
    assert.equal(table.offend('192.0.2.1')?.coolDownMs, limits.coolDownMsMin, 'the shortest cool-down again');
  });

  test('the table holds at most peersMax peers, dropping the least recently offending', () => {
    const clock = manualClock();
    const table = new PeerPenalties(limits, clock);
    for (let i = 1; i <= 4; i++) offendTimes(table, `192.0.2.${i}`, 3);
    table.offend('192.0.2.1'); // now the most recent
    for (let i = 5; i <= 20; i++) {
      table.offend(`192.0.2.${i}`);
      assert.ok(table.size <= limits.peersMax);
    }
    assert.equal(table.size, limits.peersMax);
    assert.equal(table.refuses('192.0.2.1'), false, 'evicted in turn as newer offenders came');
    offendTimes(table, '192.0.2.20', 2);
    assert.equal(table.refuses('192.0.2.20'), true, 'a recent offender is still counted');
  });

  test('limits that make no sense are refused', () => {
    const clock = manualClock();
    assert.throws(() => new PeerPenalties({ ...limits, coolDownMsMin: 0 }, clock));
    assert.throws(() => new PeerPenalties({ ...limits, coolDownMsMax: limits.coolDownMsMin - 1 }, clock));
    assert.throws(() => new PeerPenalties({ ...limits, offencesBeforePenalty: 0 }, clock));
    assert.throws(() => new PeerPenalties({ ...limits, peersMax: 0 }, clock));
    assert.doesNotThrow(() => new PeerPenalties(peerPenaltyLimits, clock));
  });
});

function http2Error(message: string, errno: number): Error {
  return Object.assign(new Error(message), { code: 'ERR_HTTP2_ERROR', errno });
}

function socketFrom(remoteAddress: string): net.Socket {
  return { remoteAddress } as net.Socket;
}

describe('PeerGuard', () => {
  const warnings = (): { lines: object[]; logger: { warn(fields: object): void } } => {
    const lines: object[] = [];
    return { lines, logger: { warn: (fields: object) => lines.push(fields) } };
  };

  test('HTTP/2 protocol errors and HTTP/1.1 header overflows are offences; other failures are not', () => {
    const { logger } = warnings();
    const guard = new PeerGuard({ logger, limits, clock: manualClock() });
    const ordinary = [
      Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }),
      Object.assign(new Error('Session closed with error code 2'), { code: 'ERR_HTTP2_SESSION_ERROR' }),
      new Error('no code'),
    ];
    for (let i = 0; i < 10; i++) for (const err of ordinary) assert.equal(guard.sessionError('192.0.2.1', err), undefined);
    for (let i = 0; i < 10; i++) assert.equal(guard.http1ClientError('192.0.2.1', Object.assign(new Error('Parse Error: Invalid method'), { code: 'HPE_INVALID_METHOD' })), undefined);
    assert.equal(guard.counters.abusiveConnections, 0);
    assert.equal(guard.table.size, 0);

    guard.sessionError('192.0.2.1', http2Error('Protocol error', -505));
    guard.sessionError('192.0.2.1', http2Error('Too many CONTINUATION frames following a HEADER frame', -905));
    const penalty = guard.http1ClientError('::ffff:192.0.2.1', Object.assign(new Error('Parse Error: Header overflow'), { code: 'HPE_HEADER_OVERFLOW' }));
    assert.equal(penalty?.peer, '192.0.2.1');
    assert.deepEqual(guard.counters, { abusiveConnections: 3, penalties: 1, refusedConnections: 0 });
    assert.equal(guard.admits(socketFrom('192.0.2.1')), false);
    assert.equal(guard.admits(socketFrom('::ffff:192.0.2.1')), false);
    assert.equal(guard.admits(socketFrom('192.0.2.2')), true);
    assert.equal(guard.counters.refusedConnections, 2);
    assert.equal(guard.belongsTo(socketFrom('::ffff:192.0.2.1'), '192.0.2.1'), true);
    assert.equal(guard.belongsTo(socketFrom('192.0.2.2'), '192.0.2.1'), false);
  });

  test('the host itself (127.0.0.1, ::1), where a local proxy connects from, is counted but never penalised', () => {
    const { lines, logger } = warnings();
    const guard = new PeerGuard({ logger, limits, clock: manualClock() });
    for (let i = 0; i < 10; i++) {
      assert.equal(guard.sessionError('127.0.0.1', http2Error('Protocol error', -505)), undefined);
      assert.equal(guard.sessionError('::1', http2Error('Protocol error', -505)), undefined);
      assert.equal(guard.sessionError('::ffff:127.0.0.1', http2Error('Protocol error', -505)), undefined);
    }
    assert.equal(guard.counters.abusiveConnections, 30);
    assert.equal(guard.counters.penalties, 0);
    assert.equal(guard.admits(socketFrom('127.0.0.1')), true);
    assert.equal(guard.admits(socketFrom('::1')), true);
    assert.deepEqual(lines, []);
    for (let i = 0; i < 3; i++) guard.sessionError('127.0.0.2', http2Error('Protocol error', -505));
    assert.equal(guard.admits(socketFrom('127.0.0.2')), false, 'the rest of 127.0.0.0/8 is an ordinary peer');
    for (let i = 0; i < 3; i++) guard.sessionError('::2', http2Error('Protocol error', -505));
    assert.equal(guard.admits(socketFrom('::2')), false, '::1 alone is exempt, not its /64');
  });

  test('one warn line per penalty, at most logLinesPerMinuteMax a minute; the next line counts the ones left out', () => {
    const { lines, logger } = warnings();
    const clock = manualClock();
    const guard = new PeerGuard({ logger, limits, clock });
    const penalise = (peer: string): void => {
      for (let i = 0; i < limits.offencesBeforePenalty; i++) guard.sessionError(peer, http2Error('Protocol error', -505));
    };
    for (let i = 1; i <= 5; i++) penalise(`192.0.2.${i}`);
    assert.equal(guard.counters.penalties, 5);
    assert.equal(lines.length, 2);
    assert.deepEqual(lines[0], { peer: '192.0.2.1', reason: 'ERR_HTTP2_ERROR: Protocol error', coolDownMs: 10_000, penalties: 1, penaltiesNotLogged: 0 });
    clock.advance(60_000);
    penalise('192.0.2.9');
    assert.equal(lines.length, 3);
    assert.deepEqual(lines[2], { peer: '192.0.2.9', reason: 'ERR_HTTP2_ERROR: Protocol error', coolDownMs: 10_000, penalties: 1, penaltiesNotLogged: 3 });
  });
});
