// A cluster node in a process of its own, for what only a whole process can do (SIGSTOP,
// SIGCONT, kill -9): it runs an Ownership loop and reports on stdout, one JSON line each, every
// acquisition and loss, and every 20 ms whether a delivery worker could send for each partition
// it ever held (the lease deadline check). Environment: FERMATA_TEST_CLUSTER_URL,
// FERMATA_TEST_NODE_ID, FERMATA_TEST_LEASE_SETTINGS (LeaseSettings as JSON).
import postgres from 'postgres';
import type { LeaseSettings } from '../../cluster/leases.ts';
import { Ownership } from '../../cluster/ownership.ts';

const url = process.env.FERMATA_TEST_CLUSTER_URL ?? '';
const nodeId = process.env.FERMATA_TEST_NODE_ID ?? '';
const settings = JSON.parse(process.env.FERMATA_TEST_LEASE_SETTINGS ?? '') as LeaseSettings;

function report(line: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

const everHeld = new Set<number>();
const ownership = await Ownership.start({
  sql: postgres(url, { max: 2, onnotice: () => {} }),
  nodeId,
  advertise: `${nodeId}.test:8080`,
  settings,
  callbacks: {
    async onAcquire(partition, epoch) {
      everHeld.add(partition);
      report({ event: 'acquired', partition, epoch: epoch.toString() });
    },
    onLose(partition) {
      report({ event: 'lost', partition });
    },
    async beforeRelease(partition) {
      report({ event: 'release', partition });
    },
    onError(error) {
      report({ event: 'error', message: String(error) });
    },
  },
});
setInterval(() => {
  const maySend: Record<number, boolean> = {};
  for (const partition of everHeld) maySend[partition] = ownership.deadlines.maySend(partition);
  report({ event: 'check', maySend });
}, 20);
