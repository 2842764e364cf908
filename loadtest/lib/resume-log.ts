/**
 * What a run's reconnections measure: how long each resume took and where
 * the time went, how many failed, and what the resumed conversations kept
 * of the replies the loss cut.
 */

/** What resumes took, over a run. */
export interface ResumeLog {
  /** Reconnect → first text delta of the next reply, ms. */
  times: number[];
  /**
   * The same time, split where it goes (ms each): the socket lost → the new
   * one open (through the load balancer); → `session.created` (the store's
   * claim and the restore); → the next turn asked; → its first delta (the
   * reply's own time to first token).
   */
  splits: { connect: number[]; restore: number[]; ask: number[]; reply: number[] };
  /** Reconnections refused before their session opened (tried again after a pause). */
  retries: number;
  /** Reconnections that got a fresh session instead (`resume_failed`) or none at all. */
  failed: number;
  /** Connections lost while their reply streamed (some of its text had come). */
  cutMidReply: number;
  /** Resumed conversations that ended with a reply cut where its last write left it (`incomplete`). */
  repliesKept: number;
  /** Connections lost while their reply was past a round of the server's tools (text or not). */
  toolsMidReply: number;
  /**
   * Resumed conversations that ended with such a round (its calls, with
   * their results): the reply's last write was at its tools.
   */
  toolRoundsKept: number;
}

/** An empty resume log. */
export function newResumeLog(): ResumeLog {
  return {
    times: [],
    splits: { connect: [], restore: [], ask: [], reply: [] },
    retries: 0,
    failed: 0,
    cutMidReply: 0,
    repliesKept: 0,
    toolsMidReply: 0,
    toolRoundsKept: 0,
  };
}
