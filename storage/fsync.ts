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

/** Writes `text` to a temporary file and makes it durable; on failure (a full disk) leaves no partial file behind. */
export async function writeTemporary(tmp: string, text: string): Promise<void> {
  try {
    const fh = await fs.open(tmp, 'w');
    try {
      await fh.writeFile(text);
      await fh.sync();
    } finally {
      await fh.close();
    }
  } catch (err) {
    await fs.rm(tmp, { force: true });
    throw err;
  }
}

/**
 * Puts `text` at `target` unless something is there already, atomically and durably: a temporary file, fsynced,
 * hard-linked to `target` (which fails when it exists, on a local disk as on NFS), its directory fsynced. Answers
 * null when `text` is what is there now, or what was there before it. A hard link, not a rename: a rename
 * replaces.
 */
export async function publishExclusively(target: string, text: string, tmp: string): Promise<string | null> {
  await writeTemporary(tmp, text);
  return linkExclusively(target, text, tmp);
}

/**
 * The rest of publishExclusively, once `tmp` holds `text` durably (writeTemporary): links it to `target` unless
 * something is there, removes `tmp` whatever happens, and fsyncs the directory. `beforeLink` runs right before the
 * link and may throw to stop it.
 */
export async function linkExclusively(
  target: string,
  text: string,
  tmp: string,
  beforeLink?: () => void,
): Promise<string | null> {
  let there: string | null = null;
  try {
    beforeLink?.();
    await fs.link(tmp, target);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    there = await fs.readFile(target, 'utf8');
    // A link retried by an NFS client after its first attempt succeeded finds its own file.
    if (there === text) there = null;
  } finally {
    await fs.rm(tmp, { force: true });
  }
  await fsyncDir(path.dirname(target));
  return there;
}

/** Replaces `target` with `text` atomically and durably: a temporary file, fsynced, renamed, its directory fsynced. */
export async function writeFileDurably(target: string, text: string): Promise<void> {
  const tmp = `${target}.tmp`;
  await writeTemporary(tmp, text);
  await fs.rename(tmp, target);
  await fsyncDir(path.dirname(target));
}
