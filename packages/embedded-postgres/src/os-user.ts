import { execFile } from 'node:child_process';
import { statSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

// PostgreSQL refuses to run as root. As root we run initdb and postgres as the
// OS user `postgres` (created when missing), so every folder on the way to the
// binaries and to the data must let that user through.

const execFileAsync = promisify(execFile);

export interface OsUser {
  name: string;
  uid: number;
  gid: number;
}

export const POSTGRES_OS_USER = 'postgres';

async function lookup(name: string): Promise<OsUser | undefined> {
  try {
    const { stdout } = await execFileAsync('getent', ['passwd', name]);
    const [, , uid, gid] = stdout.trim().split(':');
    return { name, uid: Number(uid), gid: Number(gid) };
  } catch {
    return undefined;
  }
}

/** The `postgres` OS user, created (system user, no home) when it does not exist. */
export async function ensurePostgresUser(): Promise<OsUser> {
  const found = await lookup(POSTGRES_OS_USER);
  if (found) return found;
  await execFileAsync('groupadd', ['--system', POSTGRES_OS_USER]).catch(() => undefined);
  try {
    await execFileAsync('useradd', ['--system', '--gid', POSTGRES_OS_USER, '--no-create-home', '--shell', '/usr/sbin/nologin', POSTGRES_OS_USER]);
  } catch (err) {
    // Another process may have created it at the same moment.
    const raced = await lookup(POSTGRES_OS_USER);
    if (raced) return raced;
    throw new Error(`could not create the OS user ${POSTGRES_OS_USER} that PostgreSQL runs as when started by root: ${(err as Error).message.split('\n')[0]}`);
  }
  const created = await lookup(POSTGRES_OS_USER);
  if (!created) throw new Error(`the OS user ${POSTGRES_OS_USER} was created but cannot be looked up`);
  return created;
}

/** Whether `user` may traverse every existing folder from / down to `target` (missing ones are created 0755 later). */
export function canTraverse(user: OsUser, target: string): boolean {
  let dir = path.resolve(target);
  const chain: string[] = [];
  for (;;) {
    chain.push(dir);
    const parent = path.dirname(dir);
    if (parent === dir) break;
    dir = parent;
  }
  for (const folder of chain) {
    let st;
    try {
      st = statSync(folder);
    } catch {
      continue;
    }
    const ok = st.uid === user.uid ? (st.mode & 0o100) !== 0 : st.gid === user.gid ? (st.mode & 0o010) !== 0 : (st.mode & 0o001) !== 0;
    if (!ok) return false;
  }
  return true;
}

/** The name of the user owning `uid`, or `uid N`. */
export async function userName(uid: number): Promise<string> {
  try {
    const { stdout } = await execFileAsync('getent', ['passwd', String(uid)]);
    return stdout.split(':')[0] || `uid ${uid}`;
  } catch {
    return `uid ${uid}`;
  }
}
