// The metrics GET /metrics serves (routes/metrics.ts), in prom-client registries: the engine's
// and the peer guard's. Every figure is read when the endpoint is scraped (collect callbacks),
// so the request path pays nothing per request and the numbers cannot drift from what
// /v1/stats says. Loaded at the first scrape (prom-client is not needed to serve). Main thread.
import { Counter, Gauge, Registry } from 'prom-client';
import type { Engine, EngineStats, TimerStateName } from '../../../engine/engine.ts';
import type { PeerGuard } from '../listen/peer-guard.ts';

const states: readonly TimerStateName[] = ['pending', 'delivering', 'retrying', 'delivered', 'dead', 'cancelled'];

/** A registry whose metrics read `engine` at scrape time. */
export function engineMetrics(engine: Engine): Registry {
  const registry = new Registry();
  new Gauge({
    name: 'fermata_timers',
    help: 'Resident timers by state (finished ones until their retention ends).',
    labelNames: ['state'],
    registers: [registry],
    collect() {
      const counts = engine.stats().counts;
      for (const state of states) this.set({ state }, counts[state]);
    },
  });
  new Gauge({
    name: 'fermata_wal_last_sequence',
    help: 'Sequence of the newest durable WAL record.',
    registers: [registry],
    collect() {
      this.set(engine.log.lastSeq);
    },
  });
  new Gauge({
    name: 'fermata_wal_poisoned',
    help: '1 when a failed write or fdatasync stopped the WAL from acknowledging, else 0.',
    registers: [registry],
    collect() {
      this.set(engine.log.poisoned === undefined ? 0 : 1);
    },
  });
  const walCounter = (name: string, help: string, read: () => number): void => countedAtScrape(registry, name, help, read);
  walCounter('fermata_wal_appends_total', 'Records appended to the WAL since start.', () => engine.log.counters.appends);
  walCounter('fermata_wal_fdatasyncs_total', 'Group commits (one writev and one fdatasync each; one O_DSYNC writev on a write-through segment) since start.', () => engine.log.counters.syncs);
  walCounter('fermata_wal_bytes_written_total', 'Bytes written to WAL segments since start.', () => engine.log.counters.bytesWritten);
  countedAtScrape(registry, 'fermata_reschedules_total', 'PATCHes applied (one RESCHEDULE record each) since start.', () => engine.stats().reschedules.applied);
  new Gauge({
    name: 'fermata_rescheduled_timers',
    help: 'Timers a PATCH changed that the engine holds apart (revision and fire time), and so keeps in memory.',
    registers: [registry],
    collect() {
      this.set(engine.stats().reschedules.redirects);
    },
  });
  countedAtScrape(registry, 'fermata_bulk_cancels_total', 'Bulk cancels and queue purges that cancelled timers since start (one CANCEL_BULK record each).', () => engine.stats().bulkCancels);
  countedAtScrape(registry, 'fermata_bulk_cancelled_timers_total', 'Timers cancelled by bulk cancels and queue purges since start.', () => engine.stats().timersCancelledInBulk);
  scheduleMetrics(registry, engine);
  walCounter('fermata_wal_slow_fdatasyncs_total', 'Group commit syncs (the fdatasync, or the write-through writev) slower than walLimits.slowSyncMs since start.', () => engine.log.counters.slowSyncs);
  queueHoldMetrics(registry, engine);
  return registry;
}

/** Paused queues and the timers they hold (engine/queue-pause.ts), read at scrape time as /v1/stats reads them. */
function queueHoldMetrics(registry: Registry, engine: Engine): void {
  new Gauge({
    name: 'fermata_queues_paused',
    help: 'Queues paused now: they accept timers and deliver none.',
    registers: [registry],
    collect() {
      this.set(engine.queueHoldStats().pausedQueues);
    },
  });
  new Gauge({
    name: 'fermata_timers_held',
    help: 'Due timers of paused queues waiting for their resume (pending or retrying).',
    registers: [registry],
    collect() {
      this.set(engine.queueHoldStats().held);
    },
  });
  countedAtScrape(registry, 'fermata_timers_held_released_total', 'Timers handed out for delivery since start that fell due while their queue was paused.', () => engine.queueHoldStats().heldReleased);
}

/** A counter whose value is read from `read` at each scrape (a running total kept elsewhere). */
function countedAtScrape(registry: Registry, name: string, help: string, read: () => number): void {
  new Counter({
    name,
    help,
    registers: [registry],
    collect() {
      this.reset();
      this.inc(read());
    },
  });
}

/** The peer guard's counters (listen/peer-guard.ts), read at scrape time. */
export function peerGuardMetrics(registry: Registry, guard: PeerGuard): void {
  const counter = (name: string, help: string, read: () => number): void => countedAtScrape(registry, name, help, read);
  counter('fermata_http_abusive_connections_total', 'Connections closed because their peer went past an HTTP protocol limit (reset flood, invalid frames, header floods).', () => guard.counters.abusiveConnections);
  counter('fermata_http_peer_penalties_total', 'Penalties started: a peer whose new connections are refused for a cool-down.', () => guard.counters.penalties);
  counter('fermata_http_refused_connections_total', 'New connections reset because their peer was penalised.', () => guard.counters.refusedConnections);
  new Gauge({
    name: 'fermata_http_penalty_table_peers',
    help: 'Peers the penalty table remembers (penalised, or with recent offences).',
    registers: [registry],
    collect() {
      this.set(guard.table.size);
    },
  });
}

/** Schedules and their occurrences (engine/schedules/), read at scrape time as /v1/stats reads them. */
function scheduleMetrics(registry: Registry, engine: Engine): void {
  for (const [name, help, read] of [
    ['fermata_schedules', 'Schedules (PUT /v1/schedules/{name}).', (stats: EngineStats) => stats.schedules.count],
    ['fermata_schedules_paused', 'Schedules paused now.', (stats: EngineStats) => stats.schedules.paused],
  ] as const) {
    new Gauge({
      name,
      help,
      registers: [registry],
      collect() {
        this.set(read(engine.stats()));
      },
    });
  }
  countedAtScrape(registry, 'fermata_schedule_occurrences_created_total', 'Occurrences of schedules created as timers since start.', () => engine.stats().schedules.occurrencesCreated);
  countedAtScrape(registry, 'fermata_schedule_catch_up_occurrences_total', 'Missed occurrences created late by catch_up latest or all since start (after downtime or a clock step).', () => engine.stats().schedules.catchUpCreated);
  countedAtScrape(registry, 'fermata_schedule_occurrences_fired_total', 'Occurrences of schedules delivered since start.', () => engine.stats().schedules.occurrencesFired);
}
