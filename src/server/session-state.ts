/**
 * The session as data, for the resume store: how a running session is
 * snapshotted and how a snapshot becomes a session again.
 */
import { createSession, type Session, type SessionOptions } from '../session/session.js';
import type { SessionStateSource } from './resume.js';

/** What restoring needs: a session's options, less what the snapshot holds. */
export type RestoreInput = Omit<SessionOptions, 'id' | 'character' | 'variant' | 'metadata'>;

type Snapshotting = Session & { snapshot?: () => unknown };
type RestoreFn = (state: unknown, options: RestoreInput) => Promise<Session>;

/** The session's state source; undefined when sessions cannot be snapshotted. */
export function sessionStateSource(session: Session): SessionStateSource | undefined {
  const s = session as Snapshotting;
  if (typeof s.snapshot !== 'function') return undefined;
  return { snapshot: () => s.snapshot!() };
}

/** A session rebuilt from its snapshot (not started); throws when it cannot be. */
export async function restoreFromSnapshot(state: unknown, options: RestoreInput): Promise<Session> {
  const mod = (await import('../session/session.js')) as { restoreSession?: RestoreFn };
  if (mod.restoreSession === undefined || typeof createSession !== 'function') {
    throw new Error('This server cannot restore sessions.');
  }
  return mod.restoreSession(state, options);
}
