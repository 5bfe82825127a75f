import { type WorkspaceRecord, workspaceRecordSchema } from '../schemas/control.js';
import { newId } from './secrets.js';
import type { ControlStore } from './store.js';

export const newWorkspaceId = () => newId('ws');

export async function createWorkspace(store: ControlStore, name: string): Promise<WorkspaceRecord> {
  const record: WorkspaceRecord = { id: newWorkspaceId(), name, createdAt: new Date().toISOString() };
  await store.workspaces.create(record.id, JSON.stringify(record));
  return record;
}

export async function getWorkspace(store: ControlStore, id: string): Promise<WorkspaceRecord | null> {
  const entry = await store.workspaces.get(id);
  if (entry?.operation !== 'PUT') return null;
  return workspaceRecordSchema.parse(entry.json());
}
