// Dead letters: GET /v1/dead filtered by queue, a page at a time; each timer's last status,
// error and attempts; redrive one (POST /v1/dead/{id}/retry) or every one the filter matches
// (POST /v1/dead/retry, not in cluster mode).
import { useState } from 'preact/hooks';
import { api } from '../api.ts';
import { ActionButton, ErrorNote, Scroll, Section, Time, useLoad } from '../common.tsx';
import { count } from '../format.ts';
import type { DeadTimer } from '../types.ts';

const pageSize = 100;

interface DeadPage {
  readonly dead: readonly DeadTimer[];
  readonly next_cursor: string | null;
}

/** `cluster`: the service runs as a cluster node, which does not serve POST /v1/dead/retry. */
export function DeadLetters({ cluster }: { cluster: boolean }) {
  const [queue, setQueue] = useState('');
  const [applied, setApplied] = useState('');
  const [more, setMore] = useState<readonly DeadTimer[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const [status, setStatus] = useState<string | undefined>(undefined);
  const query = (after: string | null) => {
    const params = new URLSearchParams({ limit: String(pageSize) });
    if (applied !== '') params.set('queue', applied);
    if (after !== null) params.set('cursor', after);
    return api<DeadPage>('GET', `/v1/dead?${params.toString()}`);
  };
  const first = useLoad(
    async () => {
      const page = await query(null);
      setMore([]);
      setCursor(page.next_cursor);
      return page;
    },
    [applied],
  );
  const rows = [...(first.data?.dead ?? []), ...more];
  const matching = applied === '' ? 'every dead timer' : `every dead timer of queue ${applied}`;
  return (
    <Section id="dead" title="Dead letters">
      <form
        class="filters"
        onSubmit={(event) => {
          event.preventDefault();
          setApplied(queue.trim());
        }}
      >
        <label>
          Queue <input type="text" name="queue" value={queue} onInput={(event) => setQueue(event.currentTarget.value)} placeholder="any" />
        </label>
        <button type="submit">Filter</button>
        {cluster ? null : (
          <ActionButton
            label={`Redrive ${matching}`}
            action={async () => {
              const answer = await api<{ redriven: number; more: boolean }>('POST', '/v1/dead/retry', applied === '' ? {} : { queue: applied });
              setStatus(`${count(answer.redriven)} redriven${answer.more ? '; more are left: redrive again' : ''}`);
              await first.reload();
            }}
          />
        )}
      </form>
      {status !== undefined ? <p role="status">{status}</p> : null}
      <ErrorNote error={first.error} />
      <Scroll label="Dead timers table">
        <table>
          <thead>
            <tr>
              <th scope="col">Timer</th>
              <th scope="col">Queue</th>
              <th scope="col">Attempts</th>
              <th scope="col">Last status</th>
              <th scope="col">Error</th>
              <th scope="col">Died</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((timer) => (
              <tr key={timer.id} data-timer={timer.id}>
                <th scope="row" class="id">
                  {timer.id}
                </th>
                <td>{timer.queue}</td>
                <td>{count(timer.attempts)}</td>
                <td>{timer.last_status ?? '–'}</td>
                <td class="text">
                  {timer.last_error ?? '–'} <span class="muted">({timer.reason.replace(/_/g, ' ')})</span>
                </td>
                <td>
                  <Time value={timer.last_attempt_at} />
                </td>
                <td>
                  <ActionButton
                    label="Redrive"
                    name={`Redrive ${timer.id}`}
                    action={async () => {
                      await api('POST', `/v1/dead/${encodeURIComponent(timer.id)}/retry`);
                      setStatus(`${timer.id} redriven`);
                      await first.reload();
                    }}
                  />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </Scroll>
      {rows.length === 0 && first.data !== undefined ? <p>No dead timers{applied === '' ? '' : ` in ${applied}`}.</p> : null}
      {cursor !== null ? (
        <ActionButton
          label="Load more"
          action={async () => {
            const page = await query(cursor);
            setMore([...more, ...page.dead]);
            setCursor(page.next_cursor);
          }}
        />
      ) : null}
    </Section>
  );
}
