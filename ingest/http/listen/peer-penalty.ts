// The penalty table: which peers misbehaved lately, and which of them the listeners refuse.
// A pure data structure on an injected clock (peer-guard.ts feeds it from the servers' events;
// test/unit/peer-penalty.test.ts moves its clock). Owned by the main thread's event loop.
//
//   offend(peer) ─► record { offences in the window, penalties so far, refused until }
//                    offences ≥ offencesBeforePenalty, or any offence of a remembered penalised peer
//                    ─► penalty: refused for coolDownMsMin × 2^(penalties − 1), at most coolDownMsMax
//   refuses(peer) ─► now < refused until
//
// Bounded: a record is forgotten once its window (never penalised) or its cool-down plus
// peerMemoryMs (penalised) is over, when it is next looked at; past peersMax records the least
// recently offending one is dropped (Map order: a record moves to the end on each offence), so
// memory stays bounded when many addresses offend, at the price of forgetting the oldest early.
import net from 'node:net';
import type { Clock } from '../../../engine/engine.ts';
import { assertPeerPenaltyLimits, type PeerPenaltyLimits } from '../../../engine/limits.ts';

/** A penalty that an offence started. */
export interface Penalty {
  readonly peer: string;
  readonly coolDownMs: number;
  /** Epoch ms (the clock's) when the peer is served again. */
  readonly untilMs: number;
  /** Penalties of this peer while remembered, this one included (1 for a first). */
  readonly penalties: number;
}

interface PeerRecord {
  offences: number;
  windowStartMs: number;
  penalties: number;
  refusedUntilMs: number;
}

/**
 * The key a peer is penalised under: an IPv4 address (an IPv4-mapped IPv6 one included) as
 * itself, an IPv6 address as its /64, since one subscriber usually holds a whole /64 and could
 * otherwise step around a penalty by changing address. Anything else as given.
 */
export function peerKey(address: string): string {
  if (net.isIPv4(address)) return address;
  const unzoned = address.split('%')[0] ?? address;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(unzoned);
  if (mapped?.[1] !== undefined) return mapped[1];
  if (!net.isIPv6(unzoned)) return address;
  const [head = '', tail] = unzoned.split('::');
  const headGroups = head === '' ? [] : head.split(':');
  const tailGroups = tail === undefined || tail === '' ? [] : tail.split(':');
  // A dotted IPv4 tail ("64:ff9b::192.0.2.1") is two groups wide.
  const width = (groups: readonly string[]): number => groups.reduce((sum, group) => sum + (group.includes('.') ? 2 : 1), 0);
  const groups = tail === undefined ? headGroups : [...headGroups, ...Array<string>(8 - width(headGroups) - width(tailGroups)).fill('0'), ...tailGroups];
  return `${groups
    .slice(0, 4)
    .map((group) => Number.parseInt(group, 16).toString(16))
    .join(':')}::/64`;
}

export class PeerPenalties {
  readonly #limits: PeerPenaltyLimits;
  readonly #clock: Clock;
  readonly #records = new Map<string, PeerRecord>();

  constructor(limits: PeerPenaltyLimits, clock: Clock) {
    assertPeerPenaltyLimits(limits);
    this.#limits = limits;
    this.#clock = clock;
  }

  /** Peers remembered (penalised or not yet), at most peersMax. */
  get size(): number {
    return this.#records.size;
  }

  /** Records one abusive connection of `peer` (a peerKey); the penalty it starts, if it starts one. */
  offend(peer: string): Penalty | undefined {
    const now = this.#clock.now();
    let record = this.#live(peer, now);
    if (record === undefined) {
      if (this.#records.size >= this.#limits.peersMax) this.#forgetLeastRecent();
      record = { offences: 0, windowStartMs: now, penalties: 0, refusedUntilMs: now };
    } else {
      this.#records.delete(peer);
    }
    this.#records.set(peer, record);
    if (now - record.windowStartMs >= this.#limits.offenceWindowMs) {
      record.offences = 0;
      record.windowStartMs = now;
    }
    record.offences++;
    // Still refused: a connection it opened before the penalty was cut; the penalty stands as it is.
    if (now < record.refusedUntilMs) return undefined;
    if (record.penalties === 0 && record.offences < this.#limits.offencesBeforePenalty) return undefined;
    record.penalties++;
    record.offences = 0;
    record.windowStartMs = now;
    const coolDownMs = Math.min(this.#limits.coolDownMsMax, this.#limits.coolDownMsMin * 2 ** (record.penalties - 1));
    record.refusedUntilMs = now + coolDownMs;
    return { peer, coolDownMs, untilMs: record.refusedUntilMs, penalties: record.penalties };
  }

  /** Whether a new connection of `peer` (a peerKey) is to be refused now. */
  refuses(peer: string): boolean {
    const now = this.#clock.now();
    const record = this.#live(peer, now);
    return record !== undefined && now < record.refusedUntilMs;
  }

  /** When `peer` is served again (epoch ms), if it is refused now. */
  refusedUntil(peer: string): number | undefined {
    const now = this.#clock.now();
    const record = this.#live(peer, now);
    return record !== undefined && now < record.refusedUntilMs ? record.refusedUntilMs : undefined;
  }

  /** The record of `peer`, or undefined (dropping it) once it is to be forgotten. */
  #live(peer: string, now: number): PeerRecord | undefined {
    const record = this.#records.get(peer);
    if (record === undefined) return undefined;
    const forgetAtMs = record.penalties === 0 ? record.windowStartMs + this.#limits.offenceWindowMs : record.refusedUntilMs + this.#limits.peerMemoryMs;
    if (now < forgetAtMs) return record;
    this.#records.delete(peer);
    return undefined;
  }

  #forgetLeastRecent(): void {
    const oldest = this.#records.keys().next();
    if (oldest.done !== true) this.#records.delete(oldest.value);
  }
}
