// The dashboard's shell (served at GET /ui, decision 0024): the connection state, the token
// prompt when the service wants a bearer token, and the panels as tabs. The live counters come
// from one Live (live.ts); each other panel loads its own data while it is shown. A panel for
// something this service does not run is not shown at all: the cluster outside cluster mode.
// Browser main thread.
import 'uplot/dist/uPlot.min.css';
import './style.css';
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { onUnauthorized, setToken } from './api.ts';
import { type Connection, Live } from './live.ts';
import { Cluster } from './panels/cluster.tsx';
import { DeadLetters } from './panels/dead.tsx';
import { Overview } from './panels/overview.tsx';
import { Queues } from './panels/queues.tsx';
import { Schedules } from './panels/schedules.tsx';
import { TimerLookup } from './panels/timer.tsx';
import { isClusterStats, type Stats } from './types.ts';

type Tab = 'overview' | 'queues' | 'dead' | 'timer' | 'schedules' | 'cluster';

const tabLabels: Record<Tab, string> = { overview: 'Overview', queues: 'Queues', dead: 'Dead letters', timer: 'Timer lookup', schedules: 'Schedules', cluster: 'Cluster' };

const connectionText: Record<Connection, string> = {
  connecting: 'connecting…',
  streaming: 'live (event stream)',
  polling: 'live (polling every second)',
  offline: 'offline: the service does not answer',
};

function TokenPrompt({ onToken }: { onToken: (token: string) => void }) {
  const [token, setValue] = useState('');
  return (
    <form
      class="card token"
      onSubmit={(event) => {
        event.preventDefault();
        if (token.trim() !== '') onToken(token.trim());
      }}
    >
      <h2>This service needs a bearer token</h2>
      <p>It is kept for this tab only and sent in the Authorization header of each request.</p>
      <label>
        Token <input type="password" name="token" autocomplete="off" required value={token} onInput={(event) => setValue(event.currentTarget.value)} />
      </label>
      <button type="submit">Use token</button>
    </form>
  );
}

function initialTab(): Tab {
  const hash = location.hash.slice(1);
  return hash in tabLabels ? (hash as Tab) : 'overview';
}

function App() {
  const [stats, setStats] = useState<Stats | undefined>(undefined);
  const [connection, setConnection] = useState<Connection>('connecting');
  const [needsToken, setNeedsToken] = useState(false);
  const [generation, setGeneration] = useState(0);
  const [tab, setTab] = useState<Tab>(initialTab);

  useEffect(() => {
    onUnauthorized(() => setNeedsToken(true));
    const live = new Live(setStats, setConnection);
    live.start();
    return () => live.stop();
  }, [generation]);

  const cluster = stats !== undefined && isClusterStats(stats);
  const tabs: readonly Tab[] = cluster ? ['overview', 'queues', 'dead', 'timer', 'schedules', 'cluster'] : ['overview', 'queues', 'dead', 'timer', 'schedules'];
  const shown = tabs.includes(tab) ? tab : 'overview';
  const choose = (next: Tab) => {
    setTab(next);
    history.replaceState(null, '', `#${next}`);
  };

  return (
    <>
      <header>
        <h1>fermata</h1>
        <p class={`connection ${connection}`} role="status" data-connection={connection}>
          {connectionText[connection]}
        </p>
      </header>
      {needsToken ? (
        <TokenPrompt
          onToken={(token) => {
            setToken(token);
            setNeedsToken(false);
            setGeneration(generation + 1);
          }}
        />
      ) : (
        <>
          <nav aria-label="Panels">
            {tabs.map((name) => (
              <button key={name} type="button" data-tab={name} aria-current={name === shown ? 'page' : undefined} onClick={() => choose(name)}>
                {tabLabels[name]}
              </button>
            ))}
          </nav>
          <main data-panel={shown}>
            {shown === 'overview' ? <Overview stats={stats} /> : null}
            {shown === 'queues' ? <Queues /> : null}
            {shown === 'dead' ? <DeadLetters cluster={cluster} /> : null}
            {shown === 'timer' ? <TimerLookup /> : null}
            {shown === 'schedules' ? <Schedules /> : null}
            {shown === 'cluster' ? <Cluster stats={cluster ? stats : undefined} /> : null}
          </main>
        </>
      )}
    </>
  );
}

const root = document.getElementById('app');
if (root !== null) {
  root.textContent = '';
  render(<App />, root);
}
