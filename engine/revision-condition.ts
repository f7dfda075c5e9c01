// A condition on a timer's revision (HTTP If-Match, parsed by the routes), which PATCH
// (reschedule.ts) and DELETE (cancel-lookup.ts) decide on. Pure; any thread.

/** If-Match, parsed: any revision ('*'), one of a list, or no condition (undefined). */
export type RevisionCondition = '*' | readonly number[] | undefined;

/** Whether `revision` meets `condition`: any when there is none or it is '*'. */
export function matches(condition: RevisionCondition, revision: number): boolean {
  return condition === undefined || condition === '*' || condition.includes(revision);
}
