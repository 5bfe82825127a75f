import { isRevisionConflict } from '../broker/errors.js';
import type { ControlStore } from './store.js';

/**
 * True exactly once per store: on the first start (the marker is created with compare-and-set, so of several
 * processes starting at once one answers true). The service then prints how to sign up.
 */
export async function claimFirstStart(store: ControlStore): Promise<boolean> {
  try {
    await store.meta.create('first-start', JSON.stringify({ at: new Date().toISOString() }));
    return true;
  } catch (err) {
    if (isRevisionConflict(err)) return false;
    throw err;
  }
}
