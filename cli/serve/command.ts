// `fermata serve`: the service process's command line. Parses the arguments, settles the
// settings (cli/serve/settings.ts), and runs the service (cli/serve/service-life.ts): HTTP/1.1
// and h2c on one port, h2 or HTTP/1.1 by ALPN on a TLS port when given a certificate, gRPC
// (fermata.v1.Timers and Arrow Flight) and HTTP/3 when asked, due timers delivered by the dispatcher's worker threads, and a
// drain on SIGTERM or SIGINT. Main thread only.
//
// Exit codes: 0 stopped cleanly, 1 could not start or stop cleanly (the log says why),
// 2 bad command line or config, or a port in use (stderr says why in one line).
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { httpLimits, readinessLimits } from '../../engine/limits.ts';
import { tokenLengthMin } from '../../ingest/http/listen/bearer-auth.ts';
import { messageOf, UsageError } from './errors.ts';
import { defaults, farHorizonDefaultText, farHorizonMinText, memoryBudgetMinText, type ServeSettings, serveSettings, tlsPortDefault } from './settings.ts';

const serveUsage = `Usage: fermata serve [--data DIR] [--listen HOST:PORT] [--config FILE] [--insecure]
                    [--tls-cert FILE --tls-key FILE [--tls-listen HOST:PORT]] [--grpc HOST:PORT]
                    [--http3 PORT] [--clock real|manual] [--cluster URL]

Runs the timer service: HTTP/1.1 and HTTP/2 (prior knowledge) on one cleartext port, and with
a certificate also a TLS port where ALPN picks HTTP/2 or HTTP/1.1.

  --data DIR              data directory (default ${defaults.data}; env FERMATA_DATA)
  --listen HOST:PORT      address to serve on (default ${defaults.listen}; port 0 picks a free
                          one; IPv6 as [::1]:7070; env FERMATA_LISTEN)
  --config FILE           JSON object of settings (below; relative paths in it are taken
                          from the file's directory); the environment and flags override it
  --insecure              serve a non-loopback address without bearer tokens
  --tls-cert FILE         PEM certificate (chain) for the TLS port (env FERMATA_TLS_CERT)
  --tls-key FILE          PEM private key of that certificate (env FERMATA_TLS_KEY)
  --tls-listen HOST:PORT  address of the TLS port (env FERMATA_TLS_LISTEN; default: the
                          --listen host, port 0 when --listen has port 0, else ${tlsPortDefault})
  --memory-budget BYTES   memory the service may use (e.g. 512MiB, 4GiB; at least
                          ${memoryBudgetMinText}; env FERMATA_MEMORY_BUDGET); the cgroup limit and the
                          machine's RAM apply too. Timers beyond what fits wait on disk until they near.
  --far-horizon D         timers due further ahead than D (e.g. 30m, 1h, 2d; at least
                          ${farHorizonMinText}) are moved to disk once adds and deliveries go quiet,
                          whatever the budget; "off" keeps them in memory while the budget
                          allows (default ${farHorizonDefaultText}; env FERMATA_FAR_HORIZON)
  --grpc HOST:PORT        also serve gRPC there (env FERMATA_GRPC_LISTEN): fermata.v1.Timers
                          (proto/fermata/v1/timers.proto), with server reflection and health, and
                          Arrow Flight: DoPut of record batches to ["timers"] or ["timers", QUEUE];
                          DoGet of a "pull" queue's due timers, settled by DoAction ack/nack.
                          Cleartext, or TLS with the TLS port's certificate when the config file
                          says "grpc": {"tls": true}
  --flight HOST:PORT      the same as --grpc (env FERMATA_FLIGHT_LISTEN)
  --http3 PORT            also serve HTTP/3 (QUIC, UDP) on PORT of the TLS port's host through a
                          supervised Caddy (Debian package caddy) that forwards to the cleartext
                          port over h2c; the TLS port advertises it (alt-svc). Without
                          --tls-cert/--tls-key a self-signed pair is made in DIR/http3 for local
                          use (env FERMATA_HTTP3_PORT)
  --clock real|manual     the clock timers fire by (env FERMATA_CLOCK): "real" (default), or
                          "manual", a test clock that stands still until POST /v1/clock moves
                          it forward (GET /v1/clock reads it); every listener must be on
                          loopback. It starts at the real time, after a restart where it stood
  --cluster URL           run as a node of the cluster in that PostgreSQL database
                          (postgres://user@host/db, made by \`fermata cluster init\`; env
                          FERMATA_CLUSTER_URL; the password from PGPASSWORD, the environment's
                          URL or ~/.pgpass, never this flag). The data directory is then a cache;
                          config "cluster": {"url", "node_id", "advertise", "lease_ttl_ms",
                          "renew_ms"}. docs/cluster.md, "Running a node"
  -h, --help              this text

Config file: {"data": DIR, "listen": HOST:PORT, "tokens": ["…"],
  "tls": {"cert": FILE, "key": FILE, "listen": HOST:PORT}, "grpc": {"listen": HOST:PORT, "tls": BOOL},
  "http3": {"port": PORT}, "readiness": {"disk_free_bytes_min": BYTES},
  "memory_budget": "512MiB" (or a number of bytes), "far_horizon": D, "clock": "real" | "manual",
  "dispatch": {"threads": N, "allow": ["https://hooks.internal", "10.1.0.0/16"],
               "signing_secrets": ["whsec_…"], "queue_signing_secrets": {QUEUE: ["whsec_…"]},
               "ca_file": FILE}}; every key is optional.

Delivery: due timers are POSTed to their targets by N worker threads (default: cores − 1).
Targets at private, loopback, link-local or metadata addresses are refused unless "allow"
lists them (origins or CIDRs; env FERMATA_DISPATCH_ALLOW=a,b); loopback is allowed when the
service itself listens on loopback. With "signing_secrets" (env FERMATA_SIGNING_SECRETS=a,b)
every delivery carries Standard Webhooks signatures, one per secret; a queue listed in
"queue_signing_secrets" is signed with its own secrets instead.

Bearer tokens ("tokens" in the config file, or FERMATA_TOKENS=…,…): when set, every route but
/healthz and /readyz needs "authorization: Bearer <token>". A plain token has every scope; an
object {"name", "token", "scopes": ["read", "write", "admin"], "queues": [...]} has those it
lists, on the queues it lists (403 FORBIDDEN names what it lacks). A non-loopback --listen or
--tls-listen refuses to start without them unless --insecure. Tokens are at least
${tokenLengthMin} characters.

SIGHUP (or POST /v1/admin/reload, admin scope) rereads the tokens, the signing secrets and the
allow-list from the config file and the environment; a reload that fails changes nothing and
logs why.

/readyz answers 503 while the log is poisoned, and while the data directory's file system has
fewer bytes free than "readiness"."disk_free_bytes_min" (default ${readinessLimits.diskFreeBytesMin});
adds are then refused (507 DISK_FULL), keeping the space left for cancels and delivery outcomes.
A failed write or fdatasync poisons the log: the service opens the data directory again at once
(recovery re-reads the disk), retrying every few seconds while that fails, on the same ports.

Logs are JSON lines on stdout; the line with "msg":"listening" carries the "url" served
(http://…), and with a TLS port a second such line follows with its https:// "url".
SIGTERM or SIGINT drains open requests on both ports (at most ${httpLimits.drainTimeoutMs / 1000} s) and exits 0.

Exit status: 0 stopped cleanly; 1 could not start or stop cleanly (the log says why); 2 a bad
setting, or a port another process holds ("port 7070 on 127.0.0.1 is in use"): stderr says which.
`;

type ServeCommand = { readonly kind: 'help' } | { readonly kind: 'run'; readonly settings: ServeSettings; readonly reread: () => ServeSettings };

export async function serve(argv: readonly string[]): Promise<number> {
  let command: ServeCommand;
  try {
    command = parseServeCommand(argv, process.env);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    process.stderr.write(`fermata serve: ${err.message}\n(fermata serve --help shows the options)\n`);
    return 2;
  }
  if (command.kind === 'help') {
    process.stdout.write(serveUsage);
    return 0;
  }
  // Sync writes: the lines are few (start, stop, errors) and none may be lost to an exit.
  const logger = pino(pino.destination({ dest: 1, sync: true }));
  // The service (the engine, the HTTP adapter, the dispatcher) is loaded only to run it: --help
  // and a bad setting answer without it.
  const { cluster } = command.settings;
  if (cluster !== undefined) {
    const { runClusterService } = await import('./cluster-service.ts');
    return runClusterService(command.settings, cluster, logger, command.reread);
  }
  const { runService } = await import('./service-life.ts');
  return runService(command.settings, logger, command.reread);
}

function parseServeCommand(argv: readonly string[], env: NodeJS.ProcessEnv): ServeCommand {
  const { values } = parseServeArgs(argv);
  if (values.help === true) return { kind: 'help' };
  // A reload (SIGHUP, POST /v1/admin/reload) reads the same flags, config file and environment again.
  return { kind: 'run', settings: serveSettings(values, env), reread: () => serveSettings(values, process.env) };
}

function parseServeArgs(argv: readonly string[]) {
  try {
    return parseArgs({
      args: [...argv],
      options: {
        data: { type: 'string' },
        listen: { type: 'string' },
        config: { type: 'string' },
        insecure: { type: 'boolean' },
        'tls-cert': { type: 'string' },
        'tls-key': { type: 'string' },
        'tls-listen': { type: 'string' },
        'memory-budget': { type: 'string' },
        'far-horizon': { type: 'string' },
        flight: { type: 'string' },
        grpc: { type: 'string' },
        http3: { type: 'string' },
        clock: { type: 'string' },
        cluster: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
      allowPositionals: false,
    });
  } catch (err) {
    throw new UsageError(messageOf(err));
  }
}
