import fs from 'node:fs/promises';
import path from 'node:path';

/** Makes a directory's entries (files created, renamed or removed in it) durable. */
export async function fsyncDir(dir: string): Promise<void> {
  const fh = await fs.open(dir, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/** Replaces `target` with `text` atomically and durably: a temporary file, fsynced, renamed, its directory fsynced. */
export async function writeFileDurably(target: string, text: string): Promise<void> {
  const tmp = `${target}.tmp`;
  const fh = await fs.open(tmp, 'w');
  try {
    await fh.writeFile(text);
    await fh.sync();
  } finally {
    await fh.close();
  }
  await fs.rename(tmp, target);
  await fsyncDir(path.dirname(target));
}
