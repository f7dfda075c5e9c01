// The Caddy configuration fermata writes for its HTTP/3 adapter (Caddy's native JSON, written to
// <data>/http3/caddy.json and run with `caddy run --config`): one server that terminates TLS
// and QUIC on the HTTP/3 port with fermata's certificate and forwards every request to
// fermata's own cleartext listener over h2c. Caddy also serves h1/h2 on the same port over
// TCP (its defaults); the health check uses that.
//
//   client ──h3 (UDP :PORT)──► caddy ──h2c (TCP, loopback)──► fermata cleartext port
//
// Caddy's admin API is off (no port 2019 to clash over; the supervisor restarts Caddy instead
// of reconfiguring it), automatic HTTPS is off (the certificate is fermata's), and the access
// log goes to <data>/http3/access.log as JSON lines whose "proto" says which HTTP each request
// came in over ("HTTP/3.0").
export interface CaddyConfigInput {
  /** Where Caddy listens, TCP and UDP: the TLS port's host and the --http3 port. */
  readonly host: string;
  readonly port: number;
  /** fermata's cleartext listener, as Caddy dials it. */
  readonly upstream: string;
  readonly certFile: string;
  readonly keyFile: string;
  readonly accessLogFile: string;
}

const certificateTag = 'fermata';
const serverName = 'fermata';

export function caddyConfig(input: CaddyConfigInput): unknown {
  const host = input.host.includes(':') ? `[${input.host}]` : input.host;
  return {
    admin: { disabled: true },
    logging: {
      logs: {
        default: { writer: { output: 'stderr' }, encoder: { format: 'json' }, exclude: [`http.log.access.${serverName}`] },
        access: { writer: { output: 'file', filename: input.accessLogFile }, encoder: { format: 'json' }, include: [`http.log.access.${serverName}`] },
      },
    },
    apps: {
      http: {
        servers: {
          [serverName]: {
            listen: [`${host}:${input.port}`],
            automatic_https: { disable: true },
            tls_connection_policies: [{ certificate_selection: { any_tag: [certificateTag] } }],
            logs: { default_logger_name: serverName },
            routes: [
              {
                handle: [
                  {
                    handler: 'reverse_proxy',
                    upstreams: [{ dial: input.upstream }],
                    transport: { protocol: 'http', versions: ['h2c'] },
                    // Bulk bodies stream through as they arrive, answers too.
                    flush_interval: -1,
                  },
                ],
              },
            ],
          },
        },
      },
      tls: { certificates: { load_files: [{ certificate: input.certFile, key: input.keyFile, tags: [certificateTag] }] } },
    },
  };
}
