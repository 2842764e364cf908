/**
 * Writes a planned reply as a server-sent-event stream: paced by the latency
 * model on a fixed timeline, optionally stamped, and cut short or corrupted
 * at the chunk a streaming fault names.
 */
import { performance } from 'node:perf_hooks';
import { untilAborted, waitForDrain, writeAndFlush, writeSplitUtf8 } from './http-io.js';
import type { StreamFrame } from './render.js';
import type { Rng } from './rng.js';
import { epochNow, stampText } from './stamp.js';
import type { ChatContext, Envelope, SimFault, SimLatency } from './types.js';

/** How {@link streamFrames} paces and marks what it writes. */
export interface StreamPacing {
  latency: Required<SimLatency>;
  /** End every text fragment with its send time (see `stamp.ts`). */
  stamp: boolean;
}

/** Streams `frames`, then `[DONE]`, unless the request's fault or an abort ends it first. */
export async function streamFrames(
  ctx: ChatContext,
  frames: StreamFrame[],
  envelope: Envelope,
  rng: Rng,
  { latency, stamp }: StreamPacing,
): Promise<void> {
  const { res, record, signal, fault } = ctx;
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    'x-request-id': envelope.id,
  });
  record.status = 200;
  // Headers go out at once, as real servers do; latency applies to chunks.
  res.flushHeaders();

  const total = frames.length;
  let faultAt = -1;
  if (
    fault?.type === 'reset' ||
    fault?.type === 'error-event' ||
    fault?.type === 'malformed-chunk' ||
    fault?.type === 'stall' ||
    fault?.type === 'end-without-done'
  ) {
    faultAt = Math.max(0, Math.min(fault.afterChunks ?? total, total));
  }
  let splitPending = fault?.type === 'split-utf8';
  const pacing = schedule(latency, rng);
  let lastWritten: Promise<void> = Promise.resolve();
  const clock = streamClock(signal);
  try {
    for (let i = 0; i <= total; i++) {
      if (signal.aborted) return;
      if (i === faultAt && fault !== undefined) {
        await lastWritten;
        await applyStreamFault(ctx, fault);
        return;
      }
      if (i === total) break;
      const target = pacing(i);
      // Timers run on a millisecond clock and may fire a little early:
      // sleep again until the target really is reached.
      if (target !== null && !(await clock.until(target))) return; // aborted
      const written = writeFrame(ctx, frames[i] as StreamFrame, envelope, stamp, {
        split: splitPending,
        flushed: i === faultAt - 1,
      });
      if (written.split) splitPending = false;
      if (written.flushed) lastWritten = written.flushed;
      const ok = typeof written.ok === 'boolean' ? written.ok : await written.ok;
      if (!ok) await waitForDrain(res, signal);
    }
  } finally {
    clock.close();
  }
  if (signal.aborted) return;
  res.end('data: [DONE]\n\n');
}

/** What writing one chunk did. */
interface WrittenFrame {
  /** The write's answer: false asks for a drain. */
  ok: boolean | Promise<boolean>;
  /** The chunk was written as two halves of a UTF-8 character (the `split-utf8` fault). */
  split: boolean;
  /** Resolves once the chunk reached the socket (asked for before a fault acts on it). */
  flushed?: Promise<void>;
}

/** Writes one chunk, stamped with its send time. */
function writeFrame(
  ctx: ChatContext,
  frame: StreamFrame,
  envelope: Envelope,
  stamp: boolean,
  how: { split: boolean; flushed: boolean },
): WrittenFrame {
  const { res, record, signal } = ctx;
  const sentAt = epochNow();
  const body = stamp ? stampFrame(frame, sentAt) : frame;
  const text = `data: ${JSON.stringify({
    id: envelope.id,
    object: 'chat.completion.chunk',
    created: envelope.created,
    model: envelope.model,
    ...body,
    x_sim_sent_at: sentAt,
  })}\n\n`;
  record.chunksWritten++;
  if (how.split && Buffer.byteLength(text) !== text.length) {
    return { ok: writeSplitUtf8(res, Buffer.from(text), signal), split: true };
  }
  if (how.flushed) {
    // The fault acts on the socket; let this chunk reach it first.
    const written = writeAndFlush(res, text);
    return { ok: written.ok, split: false, flushed: written.flushed };
  }
  return { ok: res.write(text), split: false };
}

/**
 * Waits on a stream's timeline: one timer at a time and one abort listener
 * for the whole stream (not one per chunk), in whole milliseconds so that
 * the streams' timers share Node's timer lists (a fractional delay makes a
 * list of its own).
 */
function streamClock(signal: AbortSignal): {
  /** Resolves true once `performance.now()` has reached `target`, false if aborted first. */
  until(target: number): Promise<boolean>;
  close(): void;
} {
  let timer: NodeJS.Timeout | undefined;
  let wake: ((reached: boolean) => void) | undefined;
  const onAbort = (): void => {
    clearTimeout(timer);
    wake?.(false);
  };
  signal.addEventListener('abort', onAbort, { once: true });
  const sleep = (ms: number): Promise<boolean> =>
    new Promise((resolve) => {
      wake = resolve;
      timer = setTimeout(resolve, ms, true);
    });
  return {
    async until(target) {
      for (let wait = target - performance.now(); wait > 0; wait = target - performance.now()) {
        if (signal.aborted || !(await sleep(Math.max(1, Math.ceil(wait))))) return false;
      }
      return !signal.aborted;
    },
    close() {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
    },
  };
}

/** Ends a stream the way the fault says, after the chunks it let through. */
async function applyStreamFault(ctx: ChatContext, fault: SimFault): Promise<void> {
  const { res, record, signal } = ctx;
  record.outcome = 'fault';
  switch (fault.type) {
    case 'reset':
      res.socket?.destroy();
      return;
    case 'error-event': {
      const error = {
        error: {
          message: fault.message ?? 'The model server failed mid-stream (simulated).',
          type: 'server_error',
          code: 500,
        },
      };
      res.end(`data: ${JSON.stringify(error)}\n\n`);
      return;
    }
    case 'malformed-chunk':
      res.end('data: {"choices":[{"index":0,"delta":{"content":"trunc\n\n');
      return;
    case 'stall':
      // Hold the socket open, writing nothing, until the client leaves or close().
      await untilAborted(signal);
      return;
    case 'end-without-done':
      res.end();
      return;
    default:
      return;
  }
}

/**
 * When chunk i is due (a `performance.now()` time), from a fixed timeline —
 * start + ttft + i·interval, each with its own jitter — so timer rounding
 * does not add up over a stream. `null`: no pacing, write at once.
 */
function schedule(latency: Required<SimLatency>, rng: Rng): (i: number) => number | null {
  const start = performance.now();
  const interval = latency.tokensPerSec > 0 ? 1000 / latency.tokensPerSec : 0;
  const paced = latency.ttftMs > 0 || interval > 0 || latency.jitterMs > 0;
  return function dueAt(i: number): number | null {
    if (!paced) return null;
    const jitter = latency.jitterMs > 0 ? (rng() * 2 - 1) * latency.jitterMs : 0;
    const target = start + latency.ttftMs + i * interval + jitter;
    // Sub-millisecond waits would each round up to a whole timer tick.
    return target - performance.now() >= 1 ? target : null;
  };
}

/** The frame with its text fragment, if any, stamped with its send time. */
function stampFrame(frame: StreamFrame, sentAt: number): StreamFrame {
  const choice = frame.choices[0];
  const content = choice?.delta.content;
  if (choice === undefined || typeof content !== 'string' || content === '') return frame;
  return {
    ...frame,
    choices: [{ ...choice, delta: { ...choice.delta, content: stampText(content, sentAt) } }],
  };
}
