// TimerRows (a batch's timer columns) → the rows @fermata/client's addMany takes, which it
// encodes as Arrow record batches cut at the server's limits. A payload given as bytes (a
// binary column, payload_base64) goes as payload_base64.
import type { TimerInput } from '../../clients/typescript/src/index.ts';
import type { TimerRows } from './mapping.ts';

export function timerInputs(rows: TimerRows): TimerInput[] {
  const timers = new Array<TimerInput>(rows.rows);
  for (let i = 0; i < rows.rows; i++) {
    const timer: TimerInput = { target: rows.target[i] as string, key: rows.key[i] as string };
    if (rows.fireAtMs !== undefined) timer.fire_at = rows.fireAtMs[i] as number;
    else if (rows.delayMs !== undefined) timer.delay_ms = rows.delayMs[i] as number;
    const payload = rows.payload?.[i];
    if (typeof payload === 'string') timer.payload = payload;
    else if (payload !== undefined) timer.payload_base64 = Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength).toString('base64');
    const headers = rows.headers?.[i];
    if (headers !== undefined && headers !== null) timer.headers = headers;
    const queue = rows.queue?.[i];
    if (queue !== undefined && queue !== null) timer.queue = queue;
    const callback = rows.callback?.[i];
    if (callback !== undefined && callback !== null) timer.callback = callback;
    const failureCallback = rows.failureCallback?.[i];
    if (failureCallback !== undefined && failureCallback !== null) timer.failure_callback = failureCallback;
    timers[i] = timer;
  }
  return timers;
}
