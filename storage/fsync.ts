import fs from 'node:fs/promises';

/** Makes a directory's entries (files created, renamed or removed in it) durable. */
export async function fsyncDir(dir: string): Promise<void> {
  const fh = await fs.open(dir, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}
