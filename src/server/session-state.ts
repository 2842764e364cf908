/**
 * The session as data, for the resume store: a running session's snapshot
 * source, and a snapshot made a session again (`session.snapshot()` and
 * `restoreSession` of the session module).
 */
import {
  restoreSession,
  type RestoreOptions,
  type Session,
  type SessionState,
} from '../session/session.js';
import { parseGroup } from '../session/history.js';
import type { SessionStateSource } from './resume.js';

/** What restoring needs: a session's options, less what the snapshot holds. */
export type RestoreInput = RestoreOptions;

/** The session's state source for the resume store (which serialises it at once: no copy first). */
export function sessionStateSource(session: Session): SessionStateSource {
  return {
    snapshot: () => session.snapshot(),
    snapshotText: () => session.snapshotText(),
    // The store appends a turn's group; the rest (settings, state) is rewritten.
    snapshotParts: () => session.snapshotParts(),
  };
}

/**
 * A stored state with its parts put back (`Session.snapshotParts`): the
 * history's groups, parsed from their JSON (which the restored history keeps
 * as theirs). Throws when a part is not JSON.
 */
export function joinParts(state: unknown, parts: readonly string[]): unknown {
  if (parts.length === 0) return state;
  const s = state as SessionState;
  const history = s?.conversation?.history;
  if (history === undefined || !Array.isArray(history.groups)) return state;
  history.groups = parts.map(parseGroup);
  return s;
}

/**
 * A session rebuilt from its stored snapshot (not started: `start()`
 * announces it and its items); throws a SnapshotError when it cannot be.
 * The session takes `state` as it is (it was parsed from the store for it).
 */
export function restoreFromSnapshot(state: unknown, options: RestoreInput): Promise<Session> {
  return restoreSession(state as SessionState, options, { copy: false });
}
