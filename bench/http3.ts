// The `http3` suite: Arrow batch ingest over HTTP/3 beside HTTP/2, in the same run, with the same
// client (headless Chromium's fetch(), test/helpers/chromium.ts), the same 10,000-timer batch
// and the same server command (`fermata serve --tls-listen … --http3 PORT`, self-signed pair):
//
//   h3   Chromium forced onto QUIC for the HTTP/3 port (--origin-to-force-quic-on), page loaded
//        from that origin. The path measured is all of it: QUIC and HTTP/3 in Chromium's network
//        service, the supervised Caddy terminating them, Caddy's HTTP/2 cleartext (h2c) hop to
//        fermata's cleartext port, then fermata's HTTP adapter and engine.
//   h2   a second Chromium with --disable-quic (so the TLS port's alt-svc cannot move it onto
//        HTTP/3), page loaded from the TLS port's origin: HTTP/2 over TLS straight into fermata.
//
// In each, the page POSTs the batch to /v1/timers (same origin: fermata has no CORS) with
// `streams` fetches in flight, warms up, then counts the 201s that complete inside the measured
// span (the page's clock). Every post's nextHopProtocol must be the phase's ('h3' or 'h2'), or
// the suite fails. Each phase gets a fresh server and data directory, so the second does not
// inherit the first's timers. The batch crosses the DevTools socket once per phase (base64) and
// is decoded once in the page. MB is 1,048,576 bytes of the batch's IPC stream. Without caddy or
// chromium the suite returns only its meta line, saying which is missing.
import { type ChildProcess, spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { request } from 'node:https';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { forceQuicFlag, freePort, openChromium, type Page, spkiHash, waitFor } from '../test/helpers/chromium.ts';
import { farFutureArrowStream } from './arrow-timers.ts';
import { startFermata, stopChild } from './fermata-child.ts';
import { type Figure, metaLine, roundTo, type SuiteOptions } from './report.ts';

const suite = 'http3';
const MiB = 1024 * 1024;
const hourMs = 3_600_000;
const target = 'https://example.com/hook';
const limits = {
  batchRows: 10_000,
  payloadBytes: 128,
  /** fetch() calls in flight at once in the page. */
  streams: 4,
  /** Caddy must answer on the HTTP/3 port within this after fermata listens. */
  caddyWaitMs: 30_000,
  /** One readiness probe's bound. */
  probeMs: 2_000,
  /** Beyond warm-up and span, how long the page may take to finish its last posts. */
  evaluateSlackMs: 60_000,
  /** Chromium must exit within this after SIGTERM, else SIGKILL. */
  browserStopMs: 10_000,
} as const;

interface Timing {
  readonly warmupMs: number;
  readonly measureMs: number;
}

const quickTiming: Timing = { warmupMs: 1000, measureMs: 4000 };
const fullTiming: Timing = { warmupMs: 2000, measureMs: 15_000 };

type Protocol = 'h3' | 'h2';

/** What the page's measurement returns. */
interface PageRun {
  /** 201s completed inside the span. */
  readonly batches: number;
  /** Posts answered, whatever the status, over the whole run (warm-up included). */
  readonly answered: number;
  /** Non-201 answers and failed fetches, over the whole run. */
  readonly errors: number;
  readonly firstError: string | null;
  /** Posts by the nextHopProtocol of their resource timing entry. */
  readonly protocols: Readonly<Record<string, number>>;
}

export async function http3Suite(options: SuiteOptions): Promise<Figure[]> {
  const missing = missingTool();
  if (missing !== undefined) {
    options.progress(`http3: skipped: ${missing}`);
    return [metaLine(suite, { skipped: missing })];
  }
  const timing = options.quick ? quickTiming : fullTiming;
  const batch = farFutureArrowStream({ nowMs: Date.now(), rows: limits.batchRows, payloadBytes: limits.payloadBytes, target, fireSpanMs: 29 * 24 * hourMs });
  const mb = batch.length / MiB;
  const seconds = (timing.warmupMs + timing.measureMs) / 1000;

  const runs = new Map<Protocol, PageRun>();
  for (const protocol of ['h3', 'h2'] as const) {
    options.progress(`http3: ${protocol}, Chromium fetch(), ${limits.streams} in flight, ${limits.batchRows}-timer batches of ${roundTo(mb, 2)} MB (${seconds} s)`);
    const run = await measure(protocol, batch, timing, options.baseDir);
    if (run.errors > 0) process.stderr.write(`http3: WARNING: ${protocol}: ${run.errors} posts failed; first: ${run.firstError}\n`);
    runs.set(protocol, run);
  }
  const h3 = runs.get('h3') as PageRun;
  const h2 = runs.get('h2') as PageRun;

  const figure = (name: string, value: number, unit: string): Figure => ({ suite, name, value, unit });
  const perRun = (protocol: Protocol, run: PageRun): Figure[] => [
    figure(`http3.${protocol}.timers_per_s`, Math.round((run.batches * limits.batchRows) / (timing.measureMs / 1000)), '1/s'),
    figure(`http3.${protocol}.mb_per_s`, roundTo((run.batches * mb) / (timing.measureMs / 1000), 1), 'MB/s'),
  ];
  return [
    metaLine(suite, {
      node: process.version,
      cpus: cpus().length,
      dir: options.baseDir,
      quick: options.quick,
      batch_rows: limits.batchRows,
      batch_bytes: batch.length,
      streams: limits.streams,
      client: `headless Chromium ${versionOf('chromium', ['--version'])}, fetch()`,
      h3_path: `QUIC in Chromium, Caddy ${versionOf('caddy', ['version'])}, h2c to fermata`,
      h2_path: 'HTTP/2 over TLS from Chromium (--disable-quic) to fermata',
      server: 'fermata serve child process, a fresh one per phase',
    }),
    ...perRun('h3', h3),
    ...perRun('h2', h2),
    figure('http3.h3_to_h2_ratio', roundTo(h3.batches / Math.max(1, h2.batches), 3), 'ratio'),
    figure('http3.errors', h3.errors + h2.errors, 'batches'),
  ];
}

function missingTool(): string | undefined {
  const has = (command: string, args: string[]): boolean => spawnSync(command, args, { stdio: 'ignore', timeout: 20_000 }).error === undefined;
  if (!has('caddy', ['version'])) return 'caddy is not installed (Debian package caddy): fermata serve --http3 needs it';
  if (!has('chromium', ['--version'])) return 'chromium is not installed (Debian package chromium): it is the HTTP/3 client';
  return undefined;
}

/** The version a tool prints on stdout ("Chromium 156.0.8078.114 built on …" gives "156.0.8078.114"). */
function versionOf(command: string, args: string[]): string {
  const result = spawnSync(command, args, { encoding: 'utf8', timeout: 20_000 });
  return /\d+(\.\d+)+/.exec(result.stdout)?.[0] ?? 'unknown';
}

/** One phase: a fresh server with both the TLS and the HTTP/3 port, a fresh Chromium for `protocol`, the page's measurement. */
async function measure(protocol: Protocol, batch: Buffer, timing: Timing, baseDir: string): Promise<PageRun> {
  const dir = await mkdtemp(join(baseDir, `fermata-bench-http3-${protocol}-`));
  let browser: ChildProcess | undefined;
  let page: Page | undefined;
  // The helper reads the child's log only up to its first "listening" line (the cleartext
  // port's), so both other ports are picked here; freePort checks UDP too, which Caddy binds.
  const tlsPort = await freePort();
  const h3Port = await freePort();
  const dataDir = join(dir, 'data');
  const service = await startFermata(baseDir, `http3-${protocol}`, { dataDir, args: ['--tls-listen', `127.0.0.1:${tlsPort}`, '--http3', String(h3Port)] });
  try {
    const certFile = join(dataDir, 'http3', 'self-signed-cert.pem');
    const ca = await readFile(certFile);
    await waitFor(`caddy to answer on 127.0.0.1:${h3Port}`, () => answersHealthz(h3Port, ca), limits.caddyWaitMs);
    const origin = `127.0.0.1:${protocol === 'h3' ? h3Port : tlsPort}`;
    const opened = await openChromium({
      url: `https://${origin}/healthz`,
      profileDir: join(dir, 'chromium'),
      trustSpki: spkiHash(certFile),
      flags: [protocol === 'h3' ? forceQuicFlag(origin) : '--disable-quic'],
      onSpawn: (child) => (browser = child),
    });
    page = opened.page;
    const loaded = await page.evaluate<number>(`(() => {
      const text = atob('${batch.toString('base64')}');
      const bytes = new Uint8Array(text.length);
      for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
      globalThis.fermataBatch = bytes;
      return bytes.length;
    })()`);
    if (loaded !== batch.length) throw new Error(`the page decoded ${loaded} bytes of the ${batch.length}-byte batch`);
    const run = await page.evaluate<PageRun>(pageMeasurement(timing), timing.warmupMs + timing.measureMs + limits.evaluateSlackMs);
    const others = Object.keys(run.protocols).filter((name) => name !== protocol);
    if (others.length > 0 || run.protocols[protocol] !== run.answered) {
      throw new Error(`http3: ${protocol} phase: posts went over ${JSON.stringify(run.protocols)} (${run.answered} answered), not all over ${protocol}`);
    }
    return run;
  } finally {
    page?.close();
    if (browser !== undefined) await stopChild(browser, limits.browserStopMs);
    await service.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

/** GET /healthz on the HTTP/3 port's TCP side (Caddy serves both), trusting only the self-signed certificate. */
function answersHealthz(port: number, ca: Buffer): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = request({ host: '127.0.0.1', port, path: '/healthz', ca, timeout: limits.probeMs }, (answer) => {
      answer.resume();
      resolve(answer.statusCode === 200);
    });
    probe.on('timeout', () => probe.destroy(new Error('probe timed out')));
    probe.on('error', () => resolve(false));
    probe.end();
  });
}

/**
 * The page's side, as an expression: `streams` loops posting globalThis.fermataBatch until the
 * span ends, counting 201s that complete inside it. Resource timing entries are read through an
 * observer (a large buffer, so none is dropped) to tally each post's nextHopProtocol.
 */
function pageMeasurement(timing: Timing): string {
  return `(async () => {
    const start = performance.now() + ${timing.warmupMs};
    const end = start + ${timing.measureMs};
    const protocols = {};
    let batches = 0, answered = 0, errors = 0, firstError = null;
    performance.setResourceTimingBufferSize(1000000);
    const observer = new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) {
        if (entry.initiatorType === 'fetch' && entry.name.endsWith('/v1/timers')) protocols[entry.nextHopProtocol] = (protocols[entry.nextHopProtocol] ?? 0) + 1;
      }
    });
    observer.observe({ type: 'resource' });
    const post = async () => {
      try {
        const answer = await fetch('/v1/timers', { method: 'POST', headers: { 'content-type': 'application/vnd.apache.arrow.stream' }, body: globalThis.fermataBatch });
        await answer.arrayBuffer();
        const at = performance.now();
        answered++;
        if (answer.status === 201) {
          if (at >= start && at < end) batches++;
        } else {
          errors++;
          firstError ??= 'status ' + answer.status;
        }
      } catch (err) {
        errors++;
        firstError ??= String(err);
      }
    };
    const loop = async () => {
      while (performance.now() < end) await post();
    };
    await Promise.all(Array.from({ length: ${limits.streams} }, loop));
    // Entries reach the observer after the fetch resolves; take what is still queued.
    await new Promise((resolve) => setTimeout(resolve, 200));
    for (const entry of observer.takeRecords()) {
      if (entry.initiatorType === 'fetch' && entry.name.endsWith('/v1/timers')) protocols[entry.nextHopProtocol] = (protocols[entry.nextHopProtocol] ?? 0) + 1;
    }
    observer.disconnect();
    return { batches, answered, errors, firstError, protocols };
  })()`;
}
