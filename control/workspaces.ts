import type { WorkspaceRecord } from '../schemas/control.js';
import { newId } from './secrets.js';
import type { ControlStore } from './store.js';

/** Creates a workspace record; `id` is given when something must refer to it before it exists (sign-up). */
export async function createWorkspace(
  store: ControlStore,
  name: string,
  id = newId('ws'),
): Promise<WorkspaceRecord> {
  const record: WorkspaceRecord = { id, name, createdAt: new Date().toISOString() };
  await store.workspaces.create(record.id, JSON.stringify(record));
  return record;
}
