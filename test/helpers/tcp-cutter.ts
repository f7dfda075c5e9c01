// A loopback TCP relay in front of a server, which a test can cut: every connection at once
// (the network between a node and its database failing), or one connection right after the
// client sent bytes holding a pattern and before any answer comes back (a COMMIT sent, its
// answer lost). The bytes are relayed as they are.
import net from 'node:net';

export interface TcpCutter {
  readonly port: number;
  /** Destroys every relayed connection now; new ones are still relayed. */
  cutAll(): void;
  /** The next client chunk holding `pattern` is relayed, then that connection is cut before any answer. */
  cutAfterClientSends(pattern: string): Promise<void>;
  close(): Promise<void>;
}

export async function startTcpCutter(targetPort: number): Promise<TcpCutter> {
  const pairs = new Set<{ client: net.Socket; upstream: net.Socket }>();
  let armed: { pattern: Buffer; done: () => void } | undefined;
  const server = net.createServer((client) => {
    const upstream = net.connect(targetPort, '127.0.0.1');
    const pair = { client, upstream };
    pairs.add(pair);
    const end = (): void => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('data', (chunk: Buffer) => {
      if (armed !== undefined && chunk.includes(armed.pattern)) {
        const { done } = armed;
        armed = undefined;
        // The server gets the bytes and then the end of the stream; the client never hears back.
        client.destroy();
        upstream.end(chunk);
        pairs.delete(pair);
        done();
        return;
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => client.write(chunk));
    client.on('close', end);
    upstream.on('close', end);
    client.on('error', end);
    upstream.on('error', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  return {
    port: typeof address === 'object' && address !== null ? address.port : 0,
    cutAll() {
      for (const { client, upstream } of pairs) {
        client.destroy();
        upstream.destroy();
      }
      pairs.clear();
    },
    cutAfterClientSends(pattern) {
      return new Promise((resolve) => {
        armed = { pattern: Buffer.from(pattern), done: resolve };
      });
    },
    async close() {
      for (const { client, upstream } of pairs) {
        client.destroy();
        upstream.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
