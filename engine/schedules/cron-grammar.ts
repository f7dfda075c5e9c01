// The cron grammar fermata accepts (docs/api.md, "Schedule rules"), checked before the cron
// library parses it, so that what a schedule may say does not change with the library's version:
// the library (croner) accepts more (7 fields, nicknames such as @daily, `W`, `+`), and those are
// refused here. This is a gate over the characters of each field, not a parser: the values,
// ranges and steps are read and range-checked by the library. Pure functions, any thread.
//
//   [seconds] minute hour day-of-month month day-of-week
//   each field: `*` | `?` (day fields only) | a list of items joined by `,`;
//   an item: value | value-value | */step | value/step | value-value/step | L forms | day#n
//
// A rule is "fixed-time" when its seconds, minute and hour fields hold no `*` and no step
// (lists and ranges count as fixed, as in Vixie cron): daylight saving treats such a rule by the
// local clock time it names (see dst-corrections.ts); any other rule fires by elapsed time.

/** The pattern to hand the library, or what is wrong with the expression (for SCHEDULE_INVALID's message). */
export type CronGrammarVerdict =
  | { readonly ok: true; readonly pattern: string; readonly fixedTime: boolean }
  | { readonly ok: false; readonly problem: string };

const fieldNames5 = ['minute', 'hour', 'day-of-month', 'month', 'day-of-week'] as const;
const fieldNames6 = ['seconds', ...fieldNames5] as const;

const monthNames = /\b(JAN|FEB|MAR|APR|MAY|JUN|JUL|AUG|SEP|OCT|NOV|DEC)\b/gi;
const dayNames = /(?<![A-Z])(SUN|MON|TUE|WED|THU|FRI|SAT)(?![A-Z])/gi;

/** The characters each field may hold once its names are replaced by numbers. */
const allowedChars: Record<(typeof fieldNames6)[number], RegExp> = {
  seconds: /^[0-9*,/-]+$/,
  minute: /^[0-9*,/-]+$/,
  hour: /^[0-9*,/-]+$/,
  'day-of-month': /^(\?|[0-9*,/L-]+)$/,
  month: /^[0-9*,/-]+$/,
  'day-of-week': /^(\?|[0-9*,/L#-]+)$/,
};

const allowedDescription: Record<(typeof fieldNames6)[number], string> = {
  seconds: 'numbers 0-59, *, ranges a-b, steps /n and lists',
  minute: 'numbers 0-59, *, ranges a-b, steps /n and lists',
  hour: 'numbers 0-23, *, ranges a-b, steps /n and lists',
  'day-of-month': 'numbers 1-31, *, ?, L, ranges a-b, steps /n and lists',
  month: 'numbers 1-12, names JAN-DEC, *, ranges a-b, steps /n and lists',
  'day-of-week': 'numbers 0-7 (0 and 7 are Sunday), names SUN-SAT, *, ?, L (5L: the last Friday), # (FRI#2: the second Friday), ranges a-b, steps /n and lists',
};

/** Checks `expression` against fermata's cron grammar; the pattern to hand the library when it passes. */
export function checkCronGrammar(expression: string, charsMax: number): CronGrammarVerdict {
  if (expression.length > charsMax) return { ok: false, problem: `is longer than ${charsMax} characters` };
  const fields = expression.trim().split(/\s+/);
  if (fields.length !== 5 && fields.length !== 6) {
    return { ok: false, problem: `has ${fields.length} fields: it takes 5 (minute hour day-of-month month day-of-week) or 6 (seconds first)` };
  }
  const names = fields.length === 6 ? fieldNames6 : fieldNames5;
  const checked: string[] = [];
  for (let i = 0; i < fields.length; i++) {
    const name = names[i];
    const raw = fields[i];
    if (name === undefined || raw === undefined) throw new Error('unreachable: the field count is checked above');
    let field = raw;
    if (name === 'month') field = field.replace(monthNames, (m) => String(monthNumber(m)));
    if (name === 'day-of-week') field = field.replace(dayNames, (d) => String(dayNumber(d)));
    if (!allowedChars[name].test(field)) {
      return { ok: false, problem: `field ${i + 1} (${name}) ${JSON.stringify(raw)} may hold only ${allowedDescription[name]}` };
    }
    // `?` is "no particular day" (Quartz): the same as `*` here, where the two day fields combine by OR.
    checked.push(field === '?' ? '*' : field);
  }
  const timeFields = fields.length === 6 ? checked.slice(0, 3) : ['0', ...checked.slice(0, 2)];
  const fixedTime = timeFields.every((f) => !f.includes('*') && !f.includes('/'));
  return { ok: true, pattern: checked.join(' '), fixedTime };
}

function monthNumber(name: string): number {
  return ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'].indexOf(name.toUpperCase()) + 1;
}

function dayNumber(name: string): number {
  return ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'].indexOf(name.toUpperCase());
}
