import { createApiKey } from './api-keys.js';
import type { ControlStore } from './store.js';
import { createWorkspace } from './workspaces.js';

export interface Bootstrapped {
  workspaceId: string;
  testKey: string;
}

/**
 * On the first start with an empty store, creates a workspace and its test key. The marker is created with
 * compare-and-set, so of several processes starting at once exactly one bootstraps.
 */
export async function bootstrapFirstWorkspace(store: ControlStore): Promise<Bootstrapped | null> {
  try {
    await store.meta.create('bootstrap', JSON.stringify({ at: new Date().toISOString() }));
  } catch {
    return null;
  }
  const ws = await createWorkspace(store, 'Default workspace');
  const { key } = await createApiKey(store, {
    workspaceId: ws.id,
    mode: 'test',
    permissions: ['ingest', 'read'],
    name: 'First-start test key',
  });
  await store.meta.put('bootstrap', JSON.stringify({ at: new Date().toISOString(), workspaceId: ws.id }));
  return { workspaceId: ws.id, testKey: key };
}
