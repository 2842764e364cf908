/**
 * The `openai` package's `OpenAIRealtimeWS` on a TLS test server (it speaks
 * wss only): its events as they come, and a bounded wait for the next of a type.
 */
import OpenAI from 'openai';
import { OpenAIRealtimeWS } from 'openai/realtime/ws';
import type { RealtimeServerEvent } from 'openai/resources/realtime/realtime';
import type { TlsTestServer } from './tls-server.js';
import { within } from './wait.js';

/**
 * An SDK connection to `model` (the character), its events, its errors, and
 * `next`, which waits for the next event of a type after those already taken.
 *
 * @example
 * const { rt, next } = connectOpenAiRealtime(t);
 * await next('session.created');
 */
export function connectOpenAiRealtime(t: TlsTestServer, model = 'plain') {
  const client = new OpenAI({ apiKey: 'test-key', baseURL: `${t.url}/v1` });
  const rt = new OpenAIRealtimeWS({ model, options: { ca: t.ca } }, client);
  const events: RealtimeServerEvent[] = [];
  const errors: unknown[] = [];
  const waiters = new Set<() => void>();
  rt.on('error', (err) => errors.push(err));
  rt.on('event', (e) => {
    events.push(e);
    for (const w of waiters) w();
  });
  let cursor = 0;
  const next = <T extends RealtimeServerEvent['type']>(type: T) =>
    within(
      new Promise<Extract<RealtimeServerEvent, { type: T }>>((resolve) => {
        const check = () => {
          const at = events.findIndex((e, i) => i >= cursor && e.type === type);
          if (at === -1) return;
          cursor = at + 1;
          waiters.delete(check);
          resolve(events[at] as Extract<RealtimeServerEvent, { type: T }>);
        };
        waiters.add(check);
        check();
      }),
      `${type} from OpenAIRealtimeWS`,
    );
  return { rt, events, errors, next };
}
