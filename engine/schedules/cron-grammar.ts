// The cron grammar fermata accepts (docs/api.md, "Schedule rules"), checked before the cron
// library parses it, so that what a schedule may say does not change with the library's version:
// the library (croner) accepts more (7 fields, nicknames such as @daily, `W`, `+`, `L-2`), and
// those are refused here. This is a gate over the form of each field, not a parser: the values,
// ranges and steps are read and range-checked by the library. Pure functions, any thread.
//
//   [seconds] minute hour day-of-month month day-of-week
//   a field:  `?` (day fields only) | item{,item}
//   an item:  * | */n | v | a-b | a-b/n | L (day-of-month) | vL, v#k (day-of-week)
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

// One item of a list: `*` or `*/step`, a value, a range `a-b` or `a-b/step`; the day fields add
// their own forms. A field is a list of items, or `?` in a day field.
const plainItem = String.raw`(?:\*(?:/\d+)?|\d+|\d+-\d+(?:/\d+)?)`;
const dayOfMonthItem = String.raw`(?:${plainItem}|L)`;
const dayOfWeekItem = String.raw`(?:${plainItem}|\d+L|\d+#\d+)`;
const listOf = (item: string, question: boolean): RegExp => new RegExp(String.raw`^(?:${item}(?:,${item})*${question ? String.raw`|\?` : ''})$`);

const fieldForms: Record<(typeof fieldNames6)[number], RegExp> = {
  seconds: listOf(plainItem, false),
  minute: listOf(plainItem, false),
  hour: listOf(plainItem, false),
  'day-of-month': listOf(dayOfMonthItem, true),
  month: listOf(plainItem, false),
  'day-of-week': listOf(dayOfWeekItem, true),
};

const steps = 'a list (a,b) of values, ranges a-b and steps */n or a-b/n';
const formDescription: Record<(typeof fieldNames6)[number], string> = {
  seconds: `*, or ${steps}, values 0-59`,
  minute: `*, or ${steps}, values 0-59`,
  hour: `*, or ${steps}, values 0-23`,
  'day-of-month': `* or ?, or ${steps} or L (the last day), values 1-31`,
  month: `*, or ${steps}, values 1-12 or JAN-DEC`,
  'day-of-week': `* or ?, or ${steps}, nL (the last weekday n of the month) or n#k (its k-th), values 0-7 (0 and 7 are Sunday) or SUN-SAT`,
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
    if (!fieldForms[name].test(field)) {
      return { ok: false, problem: `field ${i + 1} (${name}) ${JSON.stringify(raw)} is not of the form ${formDescription[name]}` };
    }
    // `?` is "no particular day" (Quartz): the same as `*` here, where the two day fields combine by OR.
    const outOfRange = field === '?' ? undefined : valueOutOfRange(field, valueRanges[name]);
    if (outOfRange !== undefined) return { ok: false, problem: `field ${i + 1} (${name}) ${JSON.stringify(raw)}: ${outOfRange}` };
    checked.push(field === '?' ? '*' : field);
  }
  const timeFields = fields.length === 6 ? checked.slice(0, 3) : ['0', ...checked.slice(0, 2)];
  const fixedTime = timeFields.every((f) => !f.includes('*') && !f.includes('/'));
  return { ok: true, pattern: checked.join(' '), fixedTime };
}

const valueRanges: Record<(typeof fieldNames6)[number], readonly [number, number]> = {
  seconds: [0, 59],
  minute: [0, 59],
  hour: [0, 23],
  'day-of-month': [1, 31],
  month: [1, 12],
  'day-of-week': [0, 7],
};

/** What is out of range in a field that has the right form (values, a-b order, steps ≥ 1, #k in 1-5); undefined when nothing is. */
function valueOutOfRange(field: string, [low, high]: readonly [number, number]): string | undefined {
  for (const item of field.split(',')) {
    const [range = '', step] = item.split('/');
    if (step !== undefined && Number(step) < 1) return `the step ${step} is below 1`;
    const [base = '', nth] = range.replace(/L$/, '').split('#');
    if (nth !== undefined && (Number(nth) < 1 || Number(nth) > 5)) return `#${nth}: a month has a 1st to 5th of each weekday`;
    if (base === '*' || base === '') continue;
    const [from = '', to] = base.split('-');
    for (const value of to === undefined ? [from] : [from, to]) {
      if (Number(value) < low || Number(value) > high) return `the value ${value} is outside ${low}-${high}`;
    }
    if (to !== undefined && Number(to) < Number(from)) return `the range ${from}-${to} runs backwards`;
  }
  return undefined;
}

function monthNumber(name: string): number {
  return ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'].indexOf(name.toUpperCase()) + 1;
}

function dayNumber(name: string): number {
  return ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'].indexOf(name.toUpperCase());
}
