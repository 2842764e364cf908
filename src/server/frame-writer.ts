/**
 * The send side of one WebSocket: frames sent during one tick of work leave
 * in one socket write instead of one system call each.
 */
import type { Duplex } from 'node:stream';
import type { WebSocket } from 'ws';

/** Writes text frames to one WebSocket. */
export interface FrameWriter {
  write(frame: string): void;
  /**
   * Characters written this tick and held back until it ends: part of
   * `ws.bufferedAmount`, but no sign of a client that stopped reading.
   */
  readonly held: number;
}

/**
 * A writer that corks the connection's socket at the first frame of a tick
 * and uncorks it once the tick's work (its microtasks included) is done, so
 * the frames a response produces together — a reply's first delta with its
 * item and part events, its closing events, or several deltas read from one
 * piece of the LLM's stream — go out in one `writev`. Nothing waits for a
 * timer: the frames leave before the event loop looks for I/O again.
 *
 * `socket` is the connection's underlying socket (the upgrade request's); a
 * stream that cannot cork gets one write per frame, as `ws` does on its own.
 *
 * @example
 * const out = createFrameWriter(ws, req.socket);
 * out.write(JSON.stringify(event));
 */
export function createFrameWriter(ws: WebSocket, socket: Duplex | undefined): FrameWriter {
  if (socket === undefined || typeof socket.cork !== 'function') {
    return { write: (frame) => ws.send(frame), held: 0 };
  }
  let held = 0;
  let corked = false;
  const flush = (): void => {
    corked = false;
    held = 0;
    socket.uncork();
  };
  return {
    write(frame) {
      if (!corked) {
        corked = true;
        socket.cork();
        process.nextTick(flush);
      }
      held += frame.length;
      ws.send(frame);
    },
    get held() {
      return held;
    },
  };
}
