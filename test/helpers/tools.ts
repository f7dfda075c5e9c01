// The outside programs some tests drive fermata with (real clients and servers no one here wrote,
// fault injectors, PostgreSQL), and the one rule for when one is missing: the test skips with a
// one-line reason naming the Debian package, except under CI (`CI` set, as CI services do and
// .ci/run does), where .ci/run has installed them all and a missing one fails the test. Looked up
// on PATH in process (no child is started to find one), once per test file.
import { accessSync, constants, readdirSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import type { TestContext } from 'node:test';

/** Each tool with the Debian package that has it (.ci/run installs the same list). */
const debianPackages = {
  caddy: 'caddy',
  chromium: 'chromium',
  curl: 'curl',
  'fiu-ctrl': 'fiu-utils',
  'fiu-run': 'fiu-utils',
  gtlsclient: 'ngtcp2-client',
  h2load: 'nghttp2-client',
  initdb: 'postgresql-15',
  openssl: 'openssl',
  pg_ctl: 'postgresql-15',
} as const;

export type ToolName = keyof typeof debianPackages;

/** True under CI, where every tool must be there. */
export const underCi = !['', '0', 'false'].includes((process.env.CI ?? '').trim().toLowerCase());

/** Debian keeps PostgreSQL's server programs off PATH, one folder per major version: searched after PATH, newest first. */
function postgresBinDirs(): string[] {
  try {
    const versions = readdirSync('/usr/lib/postgresql').filter((name) => /^\d+$/.test(name));
    return versions.sort((a, b) => Number(b) - Number(a)).map((version) => join('/usr/lib/postgresql', version, 'bin'));
  } catch {
    return [];
  }
}

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

const found = new Map<ToolName, string | undefined>();

/** The tool's absolute path, or undefined when this machine has none. */
export function toolPath(name: ToolName): string | undefined {
  if (found.has(name)) return found.get(name);
  const dirs = (process.env.PATH ?? '').split(delimiter).filter((dir) => dir !== '');
  if (name === 'initdb' || name === 'pg_ctl') dirs.push(...postgresBinDirs());
  const path = dirs.map((dir) => join(dir, name)).find(executable);
  found.set(name, path);
  return path;
}

/** Why a test cannot run here: "h2load is not installed (Debian package nghttp2-client)". */
export function missingTool(name: ToolName): string {
  return `${name} is not installed (Debian package ${debianPackages[name]})`;
}

/** Under CI, what the machine lacks is a broken set-up, not a reason to pass: throws. */
function failUnderCi(reason: string): void {
  if (underCi) throw new Error(`${reason}; under CI every tool the tests need must be installed (.ci/run installs them)`);
}

/**
 * Skips `t` for `reason` (a missing tool, python3, or a Python package pip cannot get), or under
 * CI fails it. The caller returns right after.
 */
export function skipOrFail(t: TestContext, reason: string): void {
  failUnderCi(reason);
  t.skip(reason);
}

/** The tool's path; when it is missing, skips `t` (fails it under CI) and returns undefined, and the caller returns. */
export function toolOrSkip(t: TestContext, name: ToolName): string | undefined {
  const path = toolPath(name);
  if (path === undefined) skipOrFail(t, missingTool(name));
  return path;
}

/**
 * For a tool a test can run without (one of two clients): its path, or undefined after a
 * diagnostic saying what is left out. Under CI a missing one fails the test all the same.
 */
export function toolOrNote(t: TestContext, name: ToolName, leftOut: string): string | undefined {
  const path = toolPath(name);
  if (path !== undefined) return path;
  failUnderCi(missingTool(name));
  t.diagnostic(`${missingTool(name)}: ${leftOut}`);
  return undefined;
}

/**
 * For a `describe` or `test` option, where no context exists yet: false when the tool is here,
 * else the reason to skip. Under CI a missing tool throws as the file loads, failing it.
 */
export function skipUnlessTool(name: ToolName): false | string {
  if (toolPath(name) !== undefined) return false;
  failUnderCi(missingTool(name));
  return missingTool(name);
}
