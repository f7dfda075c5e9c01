// docs/api.md's "Delivery" section states the default retry policy and the retention of
// finished timers in words and figures; this holds them to engine/queues.ts's defaults, the
// backoff formula of dispatch/retry-policy.ts and engine/limits.ts's retention, so a change of
// a default fails here until the page says it too.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { backoffMs } from '../../dispatch/retry-policy.ts';
import { retentionDefaults } from '../../engine/limits.ts';
import { defaultQueueConfig } from '../../engine/queues.ts';

const apiDoc = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8');
const delivery = apiDoc.slice(apiDoc.indexOf('## Delivery'), apiDoc.indexOf('\n## ', apiDoc.indexOf('## Delivery') + 1));
const hourMs = 3_600_000;
/** The largest draw in [0, 1): the backoff at its ceiling. */
const atCeiling = 1 - Number.EPSILON;

test('docs/api.md "Delivery": the default policy as engine/queues.ts and the backoff formula make it', () => {
  const policy = defaultQueueConfig;
  assert.match(delivery, new RegExp(`${policy.max_attempts} attempts in all, each\\s+waiting at most ${policy.timeout_ms / 1000} s`));
  assert.match(delivery, new RegExp(`backoff is drawn\\s+from ${policy.min_backoff_ms / 1000} s`));
  // The first failed attempt whose ceiling is the cap, and the sum of the ceilings before the last attempt.
  const ceilings = Array.from({ length: policy.max_attempts - 1 }, (_, i) => backoffMs(i + 1, policy, atCeiling));
  const firstCapped = ceilings.findIndex((ms) => ms === policy.max_backoff_ms) + 1;
  assert.equal(ceilings[firstCapped - 2], 2_048_000);
  assert.match(delivery, new RegExp(`capped at ${policy.max_backoff_ms / hourMs} h from the ${firstCapped}th on`));
  const totalMin = Math.floor(ceilings.reduce((sum, ms) => sum + ms, 0) / 60_000);
  assert.match(delivery, new RegExp(`at most\\s+about ${Math.floor(totalMin / 60)} h ${totalMin % 60} min of backoff`));
});

test('docs/api.md "Delivery": the retention of finished timers as engine/limits.ts sets it', () => {
  assert.match(delivery, new RegExp(`${retentionDefaults.finishedMs / hourMs} h after it was delivered or cancelled, ${retentionDefaults.deadMs / (24 * hourMs)} days after\\s+it died`));
});
