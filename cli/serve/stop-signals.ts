// SIGTERM and SIGINT ask `fermata serve` to stop: the first starts the drain; a second one
// forces the exit (1) at once, for a person who will not wait for the drain. One exception: the
// same signal again within sameStopWindowMs of the first is the same stop, delivered twice. That
// is what a signal sent to the process group does when bin/fermata.js runs under an older Node and
// starts the pinned one as its child: the group's signal reaches the service, and the launcher
// forwards its own copy a moment later (systemd's default KillMode, a terminal's Ctrl-C and test
// harnesses all signal the group). Taking that copy as a second signal made such a stop exit 1
// without draining. A person pressing Ctrl-C again does so after the window, or with a different
// signal, and still forces the exit. Main thread only.
import type { Logger } from 'pino';

/** How long the same signal again counts as the one stop already under way. */
export const sameStopWindowMs = 2_000;

export type StopVerdict = 'stop' | 'same-stop' | 'exit-now';

/** The verdicts on the stop signals as they arrive; `nowMs` is a monotonic clock. */
export class StopSignals {
  readonly #nowMs: () => number;
  #first: { readonly signal: NodeJS.Signals; readonly atMs: number } | undefined;

  constructor(nowMs: () => number) {
    this.#nowMs = nowMs;
  }

  take(signal: NodeJS.Signals): StopVerdict {
    const atMs = this.#nowMs();
    if (this.#first === undefined) {
      this.#first = { signal, atMs };
      return 'stop';
    }
    return signal === this.#first.signal && atMs - this.#first.atMs < sameStopWindowMs ? 'same-stop' : 'exit-now';
  }
}

/**
 * Catches SIGTERM and SIGINT from now on; resolves with the first. A second signal that is not
 * the same stop exits the process with 1 at once.
 */
export function stopRequested(logger: Logger): Promise<NodeJS.Signals> {
  const requested = Promise.withResolvers<NodeJS.Signals>();
  const signals = new StopSignals(() => performance.now());
  const onSignal = (signal: NodeJS.Signals): void => {
    switch (signals.take(signal)) {
      case 'stop':
        requested.resolve(signal);
        return;
      case 'same-stop':
        logger.debug({ signal, sameStopWindowMs }, 'the same signal again: the stop under way goes on');
        return;
      case 'exit-now':
        logger.fatal({ signal }, 'second signal while stopping: exiting now');
        process.exit(1);
    }
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  return requested.promise;
}
