import type { NodeDetail } from './types';

// Calls to the panel. The cookie travels by itself (same origin); the token is
// sent once, in the sign-in body, and never kept anywhere in the page.

export class HttpError extends Error {
  constructor(readonly status: number, readonly code: string, message: string) {
    super(message);
  }
}

async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(path, {
    method,
    credentials: 'same-origin',
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (res.status === 204) return undefined as T;
  const data = (await res.json().catch(() => null)) as { error?: { code: string; message: string } } | null;
  if (!res.ok) throw new HttpError(res.status, data?.error?.code ?? 'HTTP_ERROR', data?.error?.message ?? `HTTP ${res.status}`);
  return data as T;
}

export const signIn = (token: string) => call<{ expiresAt: string }>('POST', '/dashboard/api/sign-in', { token });
export const signOut = () => call<void>('POST', '/dashboard/api/sign-out');
export const me = () => call<{ signedIn: boolean; expiresAt: string | null }>('GET', '/dashboard/api/me');
export const nodeDetail = (id: string) => call<NodeDetail>('GET', `/dashboard/api/nodes/${encodeURIComponent(id)}`);
