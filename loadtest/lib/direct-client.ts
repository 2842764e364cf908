/**
 * One simulated user talking straight to the LLM (the simulator), the way
 * Troupe would: the same conversation, streamed chat completions, history
 * carried along. Its TTFT is the baseline Troupe's TTFT is divided by.
 */
import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { epochNow, readStamps } from '../../src/testing/simulator/index.js';
import { thinkPause, type ClientContext } from './session-client.js';
import { CONVERSATION } from './scenarios.js';

/** Keep-alive, no socket limit: as many streams at once as sessions. */
const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });

type Message = { role: 'system' | 'user' | 'assistant'; content: string };

/**
 * Runs one direct session until the pool stops. Never throws.
 *
 * @example await runDirectSession(ctx, 3, signal);
 */
export async function runDirectSession(
  ctx: ClientContext,
  index: number,
  signal: AbortSignal,
): Promise<void> {
  const messages: Message[] = [
    { role: 'system', content: 'You are a helpful, concise assistant.' },
  ];
  ctx.opened();
  try {
    for (let t = 0; !ctx.stopping && !ctx.signal.aborted; t++) {
      const line = (index + t) % CONVERSATION.length;
      messages.push({ role: 'user', content: CONVERSATION[line]!.user });
      ctx.turnsInFlight(1);
      const text = await directTurn(ctx, signal, messages, line).finally(() =>
        ctx.turnsInFlight(-1),
      );
      if (text === null) return;
      messages.push({ role: 'assistant', content: text });
      if (ctx.stopping) break;
      await sleep(thinkPause(ctx), undefined, { signal }).catch(() => undefined);
    }
  } finally {
    ctx.closed();
  }
}

/** One streamed completion; the reply's text, or null when it failed (counted). */
async function directTurn(
  ctx: ClientContext,
  signal: AbortSignal,
  messages: readonly Message[],
  line: number,
): Promise<string | null> {
  const rec = ctx.rec;
  const body = JSON.stringify({ model: 'sim-model', messages, stream: true });
  const startAt = epochNow();
  let firstAt: number | null = null;
  let text = '';
  const outcome = await new Promise<string | null>((resolve) => {
    const req = http.request(
      `${ctx.url}/chat/completions`,
      {
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        signal: AbortSignal.any([signal, AbortSignal.timeout(ctx.turnTimeoutMs)]),
      },
      (res) => {
        if (res.statusCode !== 200) {
          res.resume();
          resolve(`http:${res.statusCode}`);
          return;
        }
        let buffer = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          const now = epochNow();
          buffer += chunk;
          let end: number;
          while ((end = buffer.indexOf('\n\n')) >= 0) {
            const event = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            if (!event.startsWith('data: ') || event === 'data: [DONE]') continue;
            let content: unknown;
            try {
              const parsed = JSON.parse(event.slice(6)) as {
                choices?: Array<{ delta?: { content?: string | null } }>;
              };
              content = parsed.choices?.[0]?.delta?.content;
            } catch {
              rec.error('bad_chunk');
              continue;
            }
            if (typeof content !== 'string' || content === '') continue;
            firstAt ??= now;
            rec.deltas++;
            const stamped = readStamps(content);
            text += stamped.text;
            for (const sent of stamped.sentAt) rec.samples.addedPerDelta.push(now - sent);
          }
        });
        res.on('end', () => resolve(null));
        res.on('error', () => resolve('stream'));
      },
    );
    req.on('error', (err) => resolve(err.name === 'TimeoutError' ? 'timeout' : 'connect'));
    req.end(body);
  });
  if (outcome !== null) {
    if (!ctx.signal.aborted) {
      rec.turnsFailed++;
      rec.error(outcome);
    }
    return null;
  }
  const doneAt = epochNow();
  rec.turnsCompleted++;
  rec.samples.turnDuration.push(doneAt - startAt);
  if (firstAt !== null) {
    rec.samples.ttft.push(firstAt - startAt);
    rec.samples.ttftExModel.push(firstAt - startAt);
  } else rec.error('no_text');
  if (ctx.checkText && text !== CONVERSATION[line]!.reply) rec.error('lost_text');
  return text;
}
