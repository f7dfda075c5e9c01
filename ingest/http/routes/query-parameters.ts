// A preValidation hook for the dashboard's GET routes: a query parameter the route does not take,
// or one given twice, is a 400 naming it (the route's schema would drop the one silently and answer
// the other in its own words). Main thread.
import { httpErrorCodes, HttpProblem } from '../error-map.ts';

export function onlyQueryParameters(route: string, names: readonly string[]): (request: { readonly query: unknown }) => Promise<void> {
  return async (request) => {
    for (const [name, value] of Object.entries(request.query as Record<string, unknown>)) {
      if (!names.includes(name)) throw new HttpProblem(httpErrorCodes.requestInvalid, `${name} is not a parameter of ${route}: it takes ${names.length === 0 ? 'none' : names.join(', ')}`, name);
      if (Array.isArray(value)) throw new HttpProblem(httpErrorCodes.requestInvalid, `${name} is given ${value.length} times: give it once`, name);
    }
  };
}
