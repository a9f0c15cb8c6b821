import { randomBytes } from 'node:crypto';
import { mkdir, open, readFile, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';

// A reader (an operator's `caddy run --config`, a backup, the next agent
// start) must see the old file or the new one, never half of either, also
// across a power cut: temp file in the same directory, fsync, rename over the
// old name, fsync the directory so the rename itself is durable.

export async function writeFileAtomic(file: string, data: string | Buffer, mode = 0o644): Promise<void> {
  const dir = path.dirname(file);
  await mkdir(dir, { recursive: true });
  const temp = path.join(dir, `.${path.basename(file)}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`);
  try {
    const handle = await open(temp, 'wx', mode);
    try {
      await handle.writeFile(data);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temp, file);
  } catch (error) {
    await rm(temp, { force: true });
    throw error;
  }
  const dirHandle = await open(dir, 'r');
  try {
    await dirHandle.sync();
  } finally {
    await dirHandle.close();
  }
}

/** The file's bytes, or null when it does not exist. */
export async function readFileIfExists(file: string): Promise<Buffer | null> {
  try {
    return await readFile(file);
  } catch (error) {
    if ((error as { code?: string }).code === 'ENOENT') return null;
    throw error;
  }
}

/** Identity of a file's current content as the file system sees it (inode, mtime, size); null when missing. */
export async function fileStamp(file: string): Promise<string | null> {
  try {
    const s = await stat(file, { bigint: true });
    return `${s.ino}:${s.mtimeNs}:${s.size}`;
  } catch {
    return null;
  }
}
