// The page's one way to the service's API: same-origin fetch() with the bearer token, when the
// operator gave one, in the Authorization header of every call (never in a URL). The token is
// kept for the tab only (sessionStorage). A 401 answer forgets it and tells the page to ask for
// one (onUnauthorized); any other error answer is thrown as an ApiError with the service's code
// and message. Runs in the browser's main thread.

const tokenKey = 'fermata.token';

export class ApiError extends Error {
  readonly status: number;
  readonly code: string;

  constructor(status: number, code: string, message: string) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

let unauthorized: () => void = () => undefined;

/** Called (once per 401 answer) when the service wants a token the page does not have or has wrong. */
export function onUnauthorized(listener: () => void): void {
  unauthorized = listener;
}

export function setToken(token: string): void {
  sessionStorage.setItem(tokenKey, token);
}

/** The headers every call carries: the token, when there is one. */
export function authHeaders(): Record<string, string> {
  const token = sessionStorage.getItem(tokenKey);
  return token === null ? {} : { authorization: `Bearer ${token}` };
}

/** Throws the answer's error (ApiError), after asking for a token on a 401. */
export async function failIfError(response: Response): Promise<Response> {
  if (response.ok) return response;
  if (response.status === 401) {
    sessionStorage.removeItem(tokenKey);
    unauthorized();
  }
  let code = 'HTTP_' + String(response.status);
  let message = response.statusText;
  try {
    const body = (await response.json()) as { error?: { code?: string; message?: string } };
    code = body.error?.code ?? code;
    message = body.error?.message ?? message;
  } catch {
    // Not the service's JSON error shape (a proxy's page): the status says enough.
  }
  throw new ApiError(response.status, code, message);
}

/** A JSON call: GET without a body, else the body as JSON; `extra` headers such as If-Match. */
export async function api<T>(method: string, path: string, body?: unknown, extra: Record<string, string> = {}): Promise<T> {
  const headers: Record<string, string> = { ...authHeaders(), ...extra };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await failIfError(await fetch(path, { method, headers, body: body === undefined ? null : JSON.stringify(body), cache: 'no-store' }));
  return (await response.json()) as T;
}

/** A GET answering null on 404 (or 501: a route this mode of the service does not serve). */
export async function apiIfServed<T>(path: string): Promise<T | null> {
  try {
    return await api<T>('GET', path);
  } catch (err) {
    if (err instanceof ApiError && (err.status === 404 || err.status === 501)) return null;
    throw err;
  }
}
