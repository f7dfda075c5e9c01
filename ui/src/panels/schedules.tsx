// Schedules (GET /v1/schedules): each one's rule, next occurrence and state; pause and resume.
import { api } from '../api.ts';
import { ActionButton, ErrorNote, Scroll, Section, Time, useLoad } from '../common.tsx';
import { ms } from '../format.ts';
import type { Schedule } from '../types.ts';

const refreshMs = 5_000;

function rule(schedule: Schedule): string {
  if (schedule.cron !== undefined) return `${schedule.cron} (${schedule.time_zone ?? 'UTC'})`;
  return schedule.every_ms === undefined ? '–' : `every ${ms(schedule.every_ms)}`;
}

export function Schedules() {
  const schedules = useLoad(() => api<{ schedules: readonly Schedule[] }>('GET', '/v1/schedules?limit=1000'), [], refreshMs);
  const rows = schedules.data?.schedules ?? [];
  return (
    <Section id="schedules" title="Schedules">
      <ErrorNote error={schedules.error} />
      <Scroll label="Schedules table">
        <table>
          <thead>
            <tr>
              <th scope="col">Schedule</th>
              <th scope="col">Rule</th>
              <th scope="col">Next</th>
              <th scope="col">Queue</th>
              <th scope="col">Target</th>
              <th scope="col">State</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((schedule) => (
              <tr key={schedule.name} data-schedule={schedule.name}>
                <th scope="row">{schedule.name}</th>
                <td>{rule(schedule)}</td>
                <td>{schedule.paused ? '–' : <Time value={schedule.next[0]?.fire_at} />}</td>
                <td>{schedule.queue}</td>
                <td class="text">{schedule.target}</td>
                <td data-field="paused">{schedule.paused ? 'paused' : 'running'}</td>
                <td>
                  <ActionButton
                    label={schedule.paused ? `Resume ${schedule.name}` : `Pause ${schedule.name}`}
                    action={async () => {
                      await api('POST', `/v1/schedules/${encodeURIComponent(schedule.name)}/${schedule.paused ? 'resume' : 'pause'}`);
                      await schedules.reload();
                    }}
                  />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </Scroll>
      {rows.length === 0 && schedules.data !== undefined ? <p>No schedules.</p> : null}
    </Section>
  );
}
