// How an import shows that it moves: a progress bar (cli-progress: rows, megabytes, rate, ETA)
// when stdout is a terminal, else a plain line every few seconds, which a log keeps readable.
// Counts are of acknowledged rows (durable in fermata), and bytes of the file those rows reach.
import { Presets, SingleBar } from 'cli-progress';

export interface ProgressView {
  /** `rows` acknowledged in all (a resume's skipped rows included), reaching `bytes` of the file. */
  update(rows: number, bytes: number): void;
  stop(): void;
}

const mb = (bytes: number): string => (bytes / 1048576).toFixed(1);

export function barProgress(out: NodeJS.WritableStream, sizeBytes: number): ProgressView {
  const bar = new SingleBar(
    {
      stream: out,
      format: '{bar} {percentage}% | {rows} rows | {mb} of {total_mb} MB | {rate} rows/s | ETA {eta_formatted}',
      hideCursor: true,
      etaBuffer: 50,
      fps: 5,
    },
    Presets.shades_classic,
  );
  const started = performance.now();
  let firstRows: number | undefined;
  bar.start(sizeBytes, 0, { rows: 0, mb: mb(0), total_mb: mb(sizeBytes), rate: 0 });
  return {
    update(rows, bytes) {
      firstRows ??= rows;
      const seconds = (performance.now() - started) / 1000;
      bar.update(bytes, { rows, mb: mb(bytes), rate: seconds > 0 ? Math.round((rows - firstRows) / seconds) : 0 });
    },
    stop: () => bar.stop(),
  };
}

export function lineProgress(out: NodeJS.WritableStream, sizeBytes: number, intervalMs: number): ProgressView {
  const started = performance.now();
  let startRows: number | undefined;
  let last = started;
  return {
    update(rows, bytes) {
      startRows ??= rows;
      const now = performance.now();
      if (now - last < intervalMs) return;
      last = now;
      const rate = Math.round((rows - startRows) / ((now - started) / 1000));
      const percent = sizeBytes > 0 ? Math.floor((bytes / sizeBytes) * 100) : 100;
      out.write(`import: ${rows} rows, ${mb(bytes)} of ${mb(sizeBytes)} MB (${percent}%), ${rate} rows/s\n`);
    },
    stop: () => undefined,
  };
}
