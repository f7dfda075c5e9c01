// Timer lookup by key (GET /v1/timers?key=) or, when no timer has that key, by id
// (GET /v1/timers/{id}): its fields, state, revision and attempts; cancel it (DELETE) or
// reschedule it (PATCH fire_at), both at the revision shown (If-Match), so a change made
// meanwhile elsewhere is refused rather than overwritten. The timer shown is watched on the event
// stream, so its state, revision and attempts change on the page as they change in the service.
import { useEffect, useState } from 'preact/hooks';
import { ApiError, api } from '../api.ts';
import { ActionButton, ErrorNote, Section, Time } from '../common.tsx';
import { count } from '../format.ts';
import { readEvents } from '../live.ts';
import type { Timer } from '../types.ts';

/** The timer with this key, else the one with this id, else null. */
async function lookUp(text: string): Promise<Timer | null> {
  const page = await api<{ timers: readonly Timer[] }>('GET', `/v1/timers?${new URLSearchParams({ key: text, limit: '1' }).toString()}`);
  if (page.timers[0] !== undefined) return page.timers[0];
  try {
    return await api<Timer>('GET', `/v1/timers/${encodeURIComponent(text)}`);
  } catch (err) {
    if (err instanceof ApiError && (err.status === 404 || err.status === 400)) return null;
    throw err;
  }
}

/** The value a datetime-local input shows for an instant: the browser's zone, to the second. */
function localInput(iso: string): string {
  const date = new Date(iso);
  const shifted = new Date(date.getTime() - date.getTimezoneOffset() * 60_000);
  return shifted.toISOString().slice(0, 19);
}

async function withRevision(method: string, timer: Timer, body?: unknown): Promise<void> {
  const headers: Record<string, string> = { 'if-match': `"${timer.revision}"` };
  await api(method, `/v1/timers/${encodeURIComponent(timer.id)}`, body, headers);
}

function TimerView({ timer, reload }: { timer: Timer; reload: () => Promise<void> }) {
  const [fireAt, setFireAt] = useState(localInput(timer.fire_at));
  const waiting = timer.state === 'pending' || timer.state === 'retrying';
  return (
    <>
      <dl class="fields" data-timer={timer.id}>
        <dt>Id</dt>
        <dd class="id">{timer.id}</dd>
        <dt>Key</dt>
        <dd>{timer.key ?? '–'}</dd>
        <dt>State</dt>
        <dd data-field="state">{timer.state}</dd>
        <dt>Revision</dt>
        <dd data-field="revision">{count(timer.revision)}</dd>
        <dt>Fires at</dt>
        <dd data-field="fire_at">
          <Time value={timer.fire_at} />
        </dd>
        <dt>Attempts</dt>
        <dd data-field="attempts">{count(timer.attempts)}</dd>
        <dt>Queue</dt>
        <dd>{timer.queue}</dd>
        <dt>Target</dt>
        <dd class="text">{timer.target}</dd>
        <dt>Last status</dt>
        <dd>{timer.last_status ?? '–'}</dd>
        <dt>Last error</dt>
        <dd class="text">{timer.last_error ?? '–'}</dd>
        <dt>Last attempt</dt>
        <dd>
          <Time value={timer.last_attempt_at} />
        </dd>
        <dt>Next attempt</dt>
        <dd>
          <Time value={timer.next_attempt_at} />
        </dd>
        <dt>Added</dt>
        <dd>
          <Time value={timer.created_at} />
        </dd>
      </dl>
      {waiting ? (
        <div class="row">
          <label>
            New fire time (your time zone) <input type="datetime-local" step={1} name="fire_at" value={fireAt} onInput={(event) => setFireAt(event.currentTarget.value)} />
          </label>
          <ActionButton
            label="Reschedule"
            action={async () => {
              await withRevision('PATCH', timer, { fire_at: new Date(fireAt).toISOString() });
              await reload();
            }}
          />
          <ActionButton
            danger
            label="Cancel timer"
            action={async () => {
              await withRevision('DELETE', timer);
              await reload();
            }}
          />
        </div>
      ) : null}
    </>
  );
}

export function TimerLookup() {
  const [text, setText] = useState('');
  const [timer, setTimer] = useState<Timer | null | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const find = async (what: string) => {
    setError(undefined);
    try {
      setTimer(await lookUp(what));
    } catch (err) {
      setError(err);
    }
  };
  // While a timer is shown, its changes come in on the event stream (GET /v1/events?watch=), so its state is live.
  const watched = timer?.id;
  useEffect(() => {
    if (watched === undefined) return undefined;
    const abort = new AbortController();
    void readEvents(`/v1/events?${new URLSearchParams({ watch: watched }).toString()}`, abort.signal, (name, data) => {
      if (name === 'timer') setTimer(JSON.parse(data) as Timer);
    });
    return () => abort.abort();
  }, [watched]);
  return (
    <Section id="timer" title="Timer lookup">
      <form
        class="filters"
        onSubmit={(event) => {
          event.preventDefault();
          void find(text.trim());
        }}
      >
        <label>
          Key or id <input type="text" name="lookup" value={text} required onInput={(event) => setText(event.currentTarget.value)} />
        </label>
        <button type="submit">Look up</button>
      </form>
      <ErrorNote error={error} />
      {timer === null ? <p role="status">No timer has that id or key.</p> : null}
      {timer !== null && timer !== undefined ? <TimerView key={`${timer.id}/${timer.revision}/${timer.state}`} timer={timer} reload={() => find(timer.id)} /> : null}
    </Section>
  );
}
