// A one-line progress bar on stderr for the bench runner: `[####......] 3/7 store  41 s`.
// Drawn only when the stream is a terminal and CI is not set, so --json stdout, piped stderr
// and CI logs never see carriage returns. Owned by bench/run.ts (one bar per invocation);
// messages from suites go through `log`, which clears the bar, prints the line and redraws.

export interface ProgressStream {
  readonly isTTY?: boolean;
  readonly columns?: number;
  write(text: string): boolean;
}

export interface ProgressBar {
  /** Whether anything is drawn (a terminal outside CI). */
  readonly drawn: boolean;
  /** `done` of `total` steps finished; `label` names the step under way. */
  update(done: number, label: string): void;
  /** A line of text above the bar (always written, bar or not). */
  log(message: string): void;
  /** Clears the bar and stops the clock. */
  finish(): void;
}

const barCells = 24;
/** The elapsed time on the bar is redrawn this often, so a long step still shows movement. */
const redrawIntervalMs = 1000;
const fallbackColumns = 80;

export function shouldDraw(stream: ProgressStream, env: Readonly<Record<string, string | undefined>>): boolean {
  const ci = env['CI'];
  return stream.isTTY === true && (ci === undefined || ci === '' || ci === 'false' || ci === '0');
}

export function renderBar(done: number, total: number, label: string, elapsedS: number, columns: number): string {
  const share = total > 0 ? Math.min(1, done / total) : 0;
  const filled = Math.round(share * barCells);
  const line = `[${'#'.repeat(filled)}${'.'.repeat(barCells - filled)}] ${done}/${total} ${label}  ${Math.floor(elapsedS)} s`;
  return line.length < columns ? line : line.slice(0, Math.max(0, columns - 1));
}

export function progressBar(stream: ProgressStream, total: number, env: Readonly<Record<string, string | undefined>> = process.env): ProgressBar {
  const drawn = shouldDraw(stream, env);
  const startedAt = performance.now();
  let done = 0;
  let label = '';
  const clear = '\r\x1b[2K';
  const draw = (): void => {
    // A pseudo-terminal without a size (script(1), some CI runners) reports 0 columns.
    const columns = stream.columns !== undefined && stream.columns > 0 ? stream.columns : fallbackColumns;
    stream.write(`${clear}${renderBar(done, total, label, (performance.now() - startedAt) / 1000, columns)}`);
  };
  const timer = drawn ? setInterval(draw, redrawIntervalMs) : undefined;
  timer?.unref();
  return {
    drawn,
    update(nextDone, nextLabel) {
      done = nextDone;
      label = nextLabel;
      if (drawn) draw();
    },
    log(message) {
      stream.write(drawn ? `${clear}${message}\n` : `${message}\n`);
      if (drawn) draw();
    },
    finish() {
      clearInterval(timer);
      if (drawn) stream.write(clear);
    },
  };
}
