import fs from 'node:fs/promises';
import path from 'node:path';

async function fsyncPath(p: string, flags: string): Promise<void> {
  const fh = await fs.open(p, flags);
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/** Makes a directory's entries (files created, renamed or removed in it) durable. */
export const fsyncDir = (dir: string): Promise<void> => fsyncPath(dir, 'r');

/** Makes a file's contents durable. */
export const fsyncFile = (file: string): Promise<void> => fsyncPath(file, 'r+');

/** Replaces `target` with `text` atomically and durably: a temporary file, fsynced, renamed, its directory fsynced. */
export async function writeFileDurably(target: string, text: string): Promise<void> {
  const tmp = `${target}.tmp`;
  try {
    const fh = await fs.open(tmp, 'w');
    try {
      await fh.writeFile(text);
      await fh.sync();
    } finally {
      await fh.close();
    }
  } catch (err) {
    // A full disk: leave no partial file taking what little space there is.
    await fs.rm(tmp, { force: true });
    throw err;
  }
  await fs.rename(tmp, target);
  await fsyncDir(path.dirname(target));
}
