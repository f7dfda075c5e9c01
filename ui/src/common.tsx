// Small pieces every panel uses: a time in the browser's zone with UTC on hover, a figure with
// its label, a button that runs an API call and says how it went, and the hook that loads a
// panel's data (again on demand and every `refreshMs`).
import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useState } from 'preact/hooks';
import { ApiError } from './api.ts';
import { localTime } from './format.ts';

export function Time({ value }: { value: string | number | null | undefined }) {
  if (value === null || value === undefined) return <span>–</span>;
  const time = localTime(value);
  return (
    <time dateTime={new Date(value).toISOString()} title={time.utc}>
      {time.text}
    </time>
  );
}

export function Figure({ label, value, name }: { label: string; value: string; name?: string }) {
  return (
    <div class="figure" data-figure={name}>
      <dt>{label}</dt>
      <dd>{value}</dd>
    </div>
  );
}

export function errorText(err: unknown): string {
  if (err instanceof ApiError) return `${err.code}: ${err.message}`;
  return err instanceof Error ? err.message : String(err);
}

export function ErrorNote({ error }: { error: unknown }) {
  if (error === undefined || error === null) return null;
  return (
    <p class="error" role="alert">
      {errorText(error)}
    </p>
  );
}

/** A button running `action`; while it runs it is disabled, and an error it throws is shown beside it. */
/** `name`, when given, is the accessible name: a row's button says "Redrive", its name says which timer. */
export function ActionButton({ label, action, danger, name }: { label: string; action: () => Promise<unknown>; danger?: boolean; name?: string }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const run = async () => {
    setBusy(true);
    setError(undefined);
    try {
      await action();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <span class="action">
      <button type="button" class={danger === true ? 'danger' : undefined} disabled={busy} aria-label={name} onClick={() => void run()}>
        {label}
      </button>
      {error !== undefined ? (
        <span class="error" role="alert">
          {errorText(error)}
        </span>
      ) : null}
    </span>
  );
}

export interface Loaded<T> {
  readonly data: T | undefined;
  readonly error: unknown;
  readonly reload: () => Promise<void>;
}

/** Loads `load()` now, again when `reload` is called or `deps` change, and every `refreshMs` when given. */
export function useLoad<T>(load: () => Promise<T>, deps: readonly unknown[], refreshMs?: number): Loaded<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  // `load` is a new closure at each render: `deps` say when it loads something else.
  const reload = useCallback(async () => {
    try {
      setData(await load());
      setError(undefined);
    } catch (err) {
      setError(err);
    }
  }, deps);
  useEffect(() => {
    void reload();
    if (refreshMs === undefined) return undefined;
    const timer = setInterval(() => void reload(), refreshMs);
    return () => clearInterval(timer);
  }, [reload, refreshMs]);
  return { data, error, reload };
}

export function Section({ title, children, id }: { title: string; id: string; children: ComponentChildren }) {
  return (
    <section aria-labelledby={`${id}-title`} class="card">
      <h2 id={`${id}-title`}>{title}</h2>
      {children}
    </section>
  );
}

/** A table that may be wider than the screen: a region the keyboard can focus, to scroll it. */
export function Scroll({ label, children }: { label: string; children: ComponentChildren }) {
  return (
    <div class="scroll" tabIndex={0} role="region" aria-label={label}>
      {children}
    </div>
  );
}
