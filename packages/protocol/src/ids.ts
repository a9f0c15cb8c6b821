import { randomBytes } from 'node:crypto';

/**
 * Sender-unique message ids: a random per-process prefix and a counter. Cheaper
 * than a UUID per frame, and unique across reconnects of the same process.
 */
export function createIdGenerator(prefix = ''): () => string {
  const base = `${prefix}${randomBytes(6).toString('base64url')}`;
  let counter = 0;
  return () => `${base}-${(++counter).toString(36)}`;
}
