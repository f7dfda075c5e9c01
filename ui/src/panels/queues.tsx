// Queues: each queue's config, its limits (pending cap, retention), paused state and counts
// (GET /v1/queues); pause, resume, and purge after a confirmation that names how many timers it
// cancels.
import { useState } from 'preact/hooks';
import { api } from '../api.ts';
import { ActionButton, ErrorNote, Scroll, Section, useLoad } from '../common.tsx';
import { count, duration, ms, perSecond } from '../format.ts';
import type { Queue } from '../types.ts';

const refreshMs = 2_000;

function Purge({ queue, done }: { queue: Queue; done: () => Promise<void> }) {
  const [asking, setAsking] = useState(false);
  const [result, setResult] = useState<string | undefined>(undefined);
  if (!asking) {
    return (
      <>
        <button type="button" class="danger" onClick={() => setAsking(true)}>
          Purge {queue.name}…
        </button>
        {result !== undefined ? <span role="status">{result}</span> : null}
      </>
    );
  }
  const what = `${count(queue.pending)} ${queue.pending === 1 ? 'timer' : 'timers'}`;
  return (
    <span class="confirm" role="group" aria-label={`Confirm the purge of ${queue.name}`}>
      <span>
        Cancel the {what} waiting in {queue.name}?
      </span>
      <ActionButton
        danger
        label={`Purge ${what}`}
        action={async () => {
          const answer = await api<{ cancelled: number }>('DELETE', `/v1/queues/${encodeURIComponent(queue.name)}/timers`);
          setAsking(false);
          setResult(`${count(answer.cancelled)} cancelled`);
          await done();
        }}
      />
      <button type="button" onClick={() => setAsking(false)}>
        Keep them
      </button>
    </span>
  );
}

/** A queue's retention: its own, or the service's when it sets none. */
function retention(value: number | null): string {
  return value === null ? 'as the service' : duration(value);
}

export function Queues() {
  const queues = useLoad(() => api<{ queues: readonly Queue[] }>('GET', '/v1/queues'), [], refreshMs);
  return (
    <Section id="queues" title="Queues">
      <ErrorNote error={queues.error} />
      <Scroll label="Queues table">
        <table>
          <thead>
            <tr>
              <th scope="col">Queue</th>
              <th scope="col">State</th>
              <th scope="col">Pending</th>
              <th scope="col">In flight</th>
              <th scope="col">Delivered</th>
              <th scope="col">Config</th>
              <th scope="col">Limits</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {(queues.data?.queues ?? []).map((queue) => (
              <tr key={queue.name} data-queue={queue.name}>
                <th scope="row">{queue.name}</th>
                <td data-field="paused">{queue.paused ? 'paused' : 'running'}</td>
                <td data-field="pending">{count(queue.pending)}</td>
                <td data-field="in_flight">{count(queue.in_flight)}</td>
                <td data-field="delivered_per_s">{perSecond(queue.delivered_per_s)}</td>
                <td class="config">
                  {queue.delivery}, {count(queue.max_attempts)} {queue.max_attempts === 1 ? 'attempt' : 'attempts'}, timeout {ms(queue.timeout_ms)}
                  {queue.rate_per_s !== null ? `, at most ${perSecond(queue.rate_per_s)}` : ''}
                  {queue.max_concurrent !== null ? `, ${count(queue.max_concurrent)} at once` : ''}
                </td>
                <td class="config">
                  <span data-field="max_pending">{queue.max_pending === null ? 'no pending cap' : `at most ${count(queue.max_pending)} pending`}</span>,{' '}
                  <span data-field="retention_ms">done kept {retention(queue.retention_ms)}</span>,{' '}
                  <span data-field="dead_retention_ms">dead kept {retention(queue.dead_retention_ms)}</span>
                </td>
                <td class="actions">
                  <ActionButton
                    label={queue.paused ? `Resume ${queue.name}` : `Pause ${queue.name}`}
                    action={async () => {
                      await api('POST', `/v1/queues/${encodeURIComponent(queue.name)}/${queue.paused ? 'resume' : 'pause'}`);
                      await queues.reload();
                    }}
                  />
                  <Purge queue={queue} done={queues.reload} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </Scroll>
    </Section>
  );
}
