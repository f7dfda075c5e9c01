// StreamAddTimers's messages, each coded once: a request decoded by protobufjs's compiled
// decoder and read field by field into the NewTimer the handlers take (proto-loader's
// deserializer decodes, then makes a second object of every field with its default: `toObject`),
// and an answer encoded from an object already in the encoder's terms (a TimerState as its
// number) where proto-loader's serializer first copies it into a message (`fromObject`). The two
// copies were a quarter of the gRPC-only cost of a stream add (decision 0030). The other methods
// keep proto-loader's codec: they are called once per request, not once per timer. Loaded once,
// by the main thread, when the gRPC service starts.
import type { MethodDefinition } from '@grpc/grpc-js';
import protobuf from 'protobufjs';
import type { RpcStatus } from './status-map.ts';
import { protoDir, timersProtoFile } from './proto-files.ts';
import type { NewTimer, Seconds, TimerStateEnum } from './timer-messages.ts';

/** An AddTimerResponse as the encoder takes it. */
export interface AddedAnswer {
  readonly id: string;
  readonly fire_at: Seconds;
  readonly revision: number;
  readonly duplicate: boolean;
  /** TimerState's number (stateNumberOf). */
  readonly state: number;
  readonly differs: readonly string[];
}

/** A StreamAddTimersResponse as the encoder takes it. */
export type StreamAddAnswer = { readonly added: AddedAnswer } | { readonly error: RpcStatus };

/** google.protobuf.Timestamp or Duration as decoded: int64 seconds as a protobufjs Long (or a number without one). */
interface DecodedSeconds {
  readonly seconds: number | { toNumber(): number };
  readonly nanos: number;
}

/** A NewTimer as decoded: unset fields read their defaults from the message's prototype (bytes: an empty array). */
interface DecodedNewTimer {
  readonly when?: 'fire_at' | 'delay';
  readonly fire_at: DecodedSeconds | null;
  readonly delay: DecodedSeconds | null;
  readonly target: string;
  readonly payload: Buffer | readonly never[];
  readonly headers: Record<string, string>;
  readonly key: string;
  readonly queue: string;
  readonly callback: string;
  readonly failure_callback: string;
}

const noPayload = Buffer.alloc(0);

function secondsOfDecoded(value: DecodedSeconds | null): Seconds | null {
  if (value === null) return null;
  const { seconds, nanos } = value;
  return { seconds: typeof seconds === 'number' ? seconds : seconds.toNumber(), nanos };
}

/** The decoded timer in the shape proto-loader gives the other methods (timer-messages.ts's NewTimer). */
function newTimerOf(decoded: DecodedNewTimer | null): NewTimer | null {
  if (decoded === null) return null;
  const timer: { -readonly [K in keyof NewTimer]: NewTimer[K] } = {
    target: decoded.target,
    payload: decoded.payload.length > 0 ? (decoded.payload as Buffer) : noPayload,
    headers: decoded.headers,
    key: decoded.key,
    queue: decoded.queue,
    callback: decoded.callback,
    failure_callback: decoded.failure_callback,
  };
  if (decoded.when === 'fire_at') {
    timer.when = 'fire_at';
    timer.fire_at = secondsOfDecoded(decoded.fire_at);
  } else if (decoded.when === 'delay') {
    timer.when = 'delay';
    timer.delay = secondsOfDecoded(decoded.delay);
  }
  return timer;
}

export class StreamAddCodec {
  readonly #request: protobuf.Type;
  readonly #response: protobuf.Type;
  readonly #states: Readonly<Record<string, number>>;

  constructor() {
    const root = new protobuf.Root();
    root.resolvePath = (_origin, target) => (target.startsWith('google/protobuf/') ? target : `${protoDir}${target}`);
    root.loadSync(timersProtoFile, { keepCase: true });
    this.#request = root.lookupType('fermata.v1.StreamAddTimersRequest');
    this.#response = root.lookupType('fermata.v1.StreamAddTimersResponse');
    this.#states = root.lookupEnum('fermata.v1.TimerState').values;
  }

  /** A TimerState's number, as the encoder writes it. */
  stateNumberOf(state: TimerStateEnum): number {
    return this.#states[state] as number;
  }

  /** The request's timer (null: none given), as the other methods' NewTimer. */
  decode(bytes: Buffer): NewTimer | null {
    return newTimerOf((this.#request.decode(bytes) as unknown as { timer: DecodedNewTimer | null }).timer);
  }

  encode(answer: StreamAddAnswer): Buffer {
    const bytes = this.#response.encode(answer).finish();
    // protobufjs writes a Buffer where there is one (Node), as grpc-js wants it.
    return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  /** StreamAddTimers's method definition (proto-loader's) with these codecs in place of its own. */
  method(definition: MethodDefinition<unknown, unknown>): MethodDefinition<NewTimer | null, StreamAddAnswer> {
    return { ...definition, requestDeserialize: (bytes) => this.decode(bytes), responseSerialize: (answer) => this.encode(answer) } as MethodDefinition<NewTimer | null, StreamAddAnswer>;
  }
}
