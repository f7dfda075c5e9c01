// A worker thread that asks the lease deadlines before each pretend send, as a delivery worker
// does: given the shared memory, it answers each partition number posted with maySend's verdict.
import { parentPort, workerData } from 'node:worker_threads';
import { LeaseDeadlineView } from '../../cluster/lease-deadline.ts';

const view = new LeaseDeadlineView((workerData as { shared: SharedArrayBuffer }).shared);
parentPort?.on('message', (partition: number) => parentPort?.postMessage(view.maySend(partition)));
