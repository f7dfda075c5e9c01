// A bounded poll for the recipe and quickstart tests, which wait on what a child process prints
// or what the service answers. On timeout it stops polling (so a failed wait leaves nothing
// running that keeps the test file alive) and fails naming what it waited for and what
// `explain` says about the state then.
export async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs: number, explain: () => string | Promise<string> = () => ''): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}\n${await explain()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
