// Ages and hashes as the page shows them.

export function age(ms: number | null): string {
  if (ms === null) return '—';
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${s % 60} s`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h} h ${m % 60} min`;
  return `${Math.floor(h / 24)} d ${h % 24} h`;
}

export function shortHash(hash: string | null): string {
  return hash ? hash.slice(0, 8) : '—';
}

export function time(ms: number | null): string {
  return ms === null ? '—' : new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

/** A row id (a cuid) told apart from its neighbours: its last 8 characters (the first ones are a timestamp). */
export function shortId(id: string | null): string {
  return id ? id.slice(-8) : '—';
}
