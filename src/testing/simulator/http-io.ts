/**
 * The simulator's HTTP plumbing: reading a request body within a size limit,
 * answering JSON, and the careful writes the faults need (wait for drain,
 * write then know it reached the socket, cut a UTF-8 character in two).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { RecordedRequest } from './types.js';

/** Largest request body accepted. */
export const MAX_BODY_BYTES = 16 * 1024 * 1024;
/**
 * Pause between the two halves of a split UTF-8 character, so that they
 * reach the client as separate reads instead of being coalesced again.
 */
export const SPLIT_UTF8_PAUSE_MS = 15;

/** What reading a request body gave. */
export type BodyResult = { kind: 'ok'; text: string } | { kind: 'too-large' } | { kind: 'aborted' };

/** Reads a request body; past {@link MAX_BODY_BYTES} it drains but keeps nothing. */
export function readBody(req: IncomingMessage): Promise<BodyResult> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      // Past the limit, keep draining (so a 413 can be answered) but keep nothing.
      if (size <= MAX_BODY_BYTES) chunks.push(chunk);
    });
    req.on('end', () => {
      if (size > MAX_BODY_BYTES) resolve({ kind: 'too-large' });
      else resolve({ kind: 'ok', text: Buffer.concat(chunks).toString('utf8') });
    });
    // 'close' before 'end': the client went away mid-body.
    req.on('close', () => resolve({ kind: 'aborted' }));
  });
}

/** Answers `body` as JSON with `status`, noting the status on the record. */
export function sendJson(
  res: ServerResponse,
  record: RecordedRequest | undefined,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const bytes = Buffer.from(JSON.stringify(body));
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': String(bytes.length),
    ...headers,
  });
  if (record !== undefined) record.status = status;
  res.end(bytes);
}

/** Resolves on the response's next `drain`, or once `signal` aborts. */
export function waitForDrain(res: ServerResponse, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) {
      resolve();
      return;
    }
    const done = (): void => {
      res.off('drain', done);
      signal.removeEventListener('abort', done);
      resolve();
    };
    res.on('drain', done);
    signal.addEventListener('abort', done);
  });
}

/** Writes a chunk; `flushed` resolves once it has been handed to the socket. */
export function writeAndFlush(
  res: ServerResponse,
  text: string,
): { ok: boolean; flushed: Promise<void> } {
  let ok = true;
  const flushed = new Promise<void>((resolve) => {
    ok = res.write(text, () => resolve());
  });
  return { ok, flushed };
}

/** Writes bytes in two writes that cut the first multi-byte character in half. */
export async function writeSplitUtf8(
  res: ServerResponse,
  bytes: Buffer,
  signal: AbortSignal,
): Promise<boolean> {
  // A lead byte of a multi-byte sequence is 11xxxxxx.
  const lead = bytes.findIndex((b) => b >= 0xc0);
  if (lead < 0) return res.write(bytes);
  await new Promise<void>((resolve) => res.write(bytes.subarray(0, lead + 1), () => resolve()));
  try {
    await sleep(SPLIT_UTF8_PAUSE_MS, undefined, { signal });
  } catch {
    return true;
  }
  return res.write(bytes.subarray(lead + 1));
}

/** Resolves once `signal` aborts (at once if it already has): a stalled response's wait. */
export function untilAborted(signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', () => resolve(), { once: true });
  });
}
