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
  const until = streamClock(signal);

  for (let i = 0; i <= total; i++) {
    if (signal.aborted) return;
    if (i === faultAt && fault !== undefined) {
      await lastWritten;
      await applyStreamFault(ctx, fault);
      return;
    }
    if (i === total) break;
    const target = pacing(i);
    if (target !== null && !(await until(target))) return; // aborted
    const sentAt = epochNow();
    const frame = stamp ? stampFrame(frames[i] as StreamFrame, sentAt) : frames[i];
    const text = `data: ${JSON.stringify({
      id: envelope.id,
      object: 'chat.completion.chunk',
      created: envelope.created,
      model: envelope.model,
      ...frame,
      x_sim_sent_at: sentAt,
    })}\n\n`;
    let ok: boolean;
    if (splitPending && Buffer.byteLength(text) !== text.length) {
      splitPending = false;
      ok = await writeSplitUtf8(res, Buffer.from(text), signal);
    } else if (i === faultAt - 1) {
      // The fault acts on the socket; let this chunk reach it first.
      const written = writeAndFlush(res, text);
      ok = written.ok;
      lastWritten = written.flushed;
    } else {
      ok = res.write(text);
    }
    record.chunksWritten++;
    if (!ok) await waitForDrain(res, signal);
  }
  if (signal.aborted) return;
  res.end('data: [DONE]\n\n');
}

/**
 * Waits on a stream's timeline: one timer at a time and one abort listener
 * for the whole stream (the request's signal, which ends with it), not one
 * per chunk; in whole milliseconds, so that the streams' timers share Node's
 * timer lists (a fractional delay makes a list of its own). The returned
 * wait resolves true once `performance.now()` has reached `target`, false
 * if the request was aborted first.
 */
function streamClock(signal: AbortSignal): (target: number) => Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  let wake: ((reached: boolean) => void) | undefined;
  signal.addEventListener(
    'abort',
    () => {
      clearTimeout(timer);
      wake?.(false);
    },
    { once: true },
  );
  const sleep = (ms: number): Promise<boolean> =>
    new Promise((resolve) => {
      wake = resolve;
      timer = setTimeout(resolve, ms, true);
    });
  return async (target) => {
    // Timers run on a millisecond clock and may fire a little early:
    // sleep again until the target really is reached.
    for (let wait = target - performance.now(); wait > 0; wait = target - performance.now()) {
      if (signal.aborted || !(await sleep(Math.max(1, Math.ceil(wait))))) return false;
    }
    return !signal.aborted;
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
