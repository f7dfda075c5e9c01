// The standard gRPC health service (grpc.health.v1.Health, grpc-health-check's implementation)
// following the service's readiness, as GET /readyz does (ingest/readiness.ts): `""` and
// fermata.v1.Timers are NOT_SERVING while the log is poisoned, the disk is nearly full or the
// delivery workers are warming up, SERVING otherwise, and NOT_SERVING for good once the service
// stops. A Check reads the readiness first, so it answers as /readyz would at that moment; Watch
// streams hear each change, read every `healthLimits.refreshMs` while the server runs. Main thread.
import { HealthImplementation, type ServingStatus } from 'grpc-health-check';
import { notReady, type ReadinessSources } from '../readiness.ts';

export const healthLimits = {
  /** How often readiness is read for Watch streams (a Check reads it itself). */
  refreshMs: 1_000,
} as const;

/** The part of a grpc-js Server the health service is added to. */
type ServiceHost = Parameters<HealthImplementation['addToServer']>[0];
type Implementation = Parameters<ServiceHost['addService']>[1];
type CheckHandler = (call: unknown, callback: unknown) => void;

export class ReadinessHealth {
  readonly #services: readonly string[];
  readonly #readiness: ReadinessSources | (() => Promise<string | undefined>) | undefined;
  readonly #health: HealthImplementation;
  #status: ServingStatus = 'SERVING';
  #stopped = false;
  #timer: NodeJS.Timeout | undefined;

  /**
   * `services` are the names health answers for (`""`, the whole server, among them); readiness
   * is a single node's sources, or a function giving why the service is not ready (a cluster
   * node's /readyz reason); undefined: SERVING until stopped.
   */
  constructor(services: readonly string[], readiness: ReadinessSources | (() => Promise<string | undefined>) | undefined) {
    this.#services = services;
    this.#readiness = readiness;
    this.#health = new HealthImplementation(Object.fromEntries(services.map((name) => [name, this.#status])));
  }

  /** Adds grpc.health.v1.Health to `server`, its Check reading readiness first, and starts following readiness. */
  addTo(server: ServiceHost): void {
    this.#health.addToServer({
      addService: (definition, implementation: Implementation) => {
        const check = implementation.check as CheckHandler;
        server.addService(definition, {
          ...implementation,
          check: (call: unknown, callback: unknown) => void this.refresh().then(() => check(call, callback)),
        });
      },
    });
    if (this.#readiness === undefined) return;
    this.#timer = setInterval(() => void this.refresh(), healthLimits.refreshMs);
    this.#timer.unref();
    void this.refresh();
  }

  /** Reads readiness and sets every service's status to it (Watch streams hear a change). */
  async refresh(): Promise<void> {
    if (this.#readiness === undefined || this.#stopped) return;
    const why = typeof this.#readiness === 'function' ? await this.#readiness() : await notReady(this.#readiness);
    if (!this.#stopped) this.#set(why === undefined ? 'SERVING' : 'NOT_SERVING');
  }

  /** NOT_SERVING from now on: the server is stopping. */
  stopping(): void {
    this.#stopped = true;
    clearInterval(this.#timer);
    this.#set('NOT_SERVING');
  }

  #set(status: ServingStatus): void {
    if (status === this.#status) return;
    this.#status = status;
    for (const name of this.#services) this.#health.setStatus(name, status);
  }
}
