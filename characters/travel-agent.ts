/**
 * A travel agent whose flight search is slow (about 3 s) and runs in the
 * background: the model is told at once that the search has started, so the
 * character says "I'm on it" and keeps talking; the search reports progress
 * (spoken in voice sessions); when it finishes, the character tells the user
 * at the next pause. Flights are made up, but the same route always gets the
 * same flights.
 */
import { z } from 'zod';
import { defineCharacter, defineTool } from '../src/index.js';

/** How long a search takes, and when it reports progress. */
const SEARCH_MS = 3_000;
const AIRLINES = ['Skylark', 'Northwind', 'Bluejay', 'Aurora'];

/** Waits `ms`, or rejects when the signal aborts (the session closed). */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason as Error);
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        reject(signal.reason as Error);
      },
      { once: true },
    );
  });
}

/** FNV-1a: a small, stable hash, so a route gets the same flights on every search. */
function hash(text: string): number {
  let h = 0x811c9dc5;
  for (const ch of text.toLowerCase()) {
    h ^= ch.codePointAt(0)!;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

const searchFlights = defineTool({
  name: 'search_flights',
  description:
    'Search flights between two cities on a date. Slow: it runs in the background and its ' +
    'result comes later; tell the user you are searching.',
  parameters: z.object({
    from: z.string().describe('Departure city, e.g. London'),
    to: z.string().describe('Arrival city, e.g. Lisbon'),
    date: z.string().describe('Travel date, e.g. 2026-12-01 or "next Friday"'),
  }),
  background: true,
  timeoutMs: 20_000,
  speakProgress: true,
  handler: async ({ from, to, date }, ctx) => {
    await sleep(SEARCH_MS / 2, ctx.signal);
    ctx.progress(`Still searching: ${AIRLINES.length / 2} of ${AIRLINES.length} airlines checked.`);
    await sleep(SEARCH_MS / 2, ctx.signal);
    const h = hash(`${from}>${to}@${date}`);
    const flights = [0, 1].map((i) => ({
      airline: AIRLINES[(h >>> (i * 4)) % AIRLINES.length]!,
      departs: `${String(6 + ((h >>> (i * 5)) % 14)).padStart(2, '0')}:${i ? '45' : '10'}`,
      price_eur: 60 + ((h >>> (i * 6)) % 240),
    }));
    return { from, to, date, flights };
  },
});

const holdSeat = defineTool({
  name: 'hold_seat',
  description: 'Hold a seat on a flight the search found, for 24 hours.',
  parameters: z.object({ airline: z.string(), departs: z.string() }),
  handler: ({ airline, departs }, ctx) => {
    const holds = ((ctx.session.state.holds as string[] | undefined) ??= []);
    holds.push(`${airline} ${departs}`);
    return `Seat held on the ${departs} ${airline} flight for 24 hours.`;
  },
});

export default defineCharacter({
  name: 'Travel agent',
  description: 'Finds flights (a slow search that runs in the background) and holds seats.',
  voice: { flite: 'slt', espeak: 'en-gb', openai: 'shimmer' },
  instructions: {
    prompt:
      'You are a cheerful travel agent. To find flights call search_flights; it runs in the ' +
      'background, so say you are searching and keep chatting (ask about luggage or seats). ' +
      'When its result arrives, tell the user the cheapest flight in one or two sentences. ' +
      'Hold a seat with hold_seat only when asked.',
    language: 'en',
  },
  tools: [searchFlights, holdSeat],
  greeting: 'Hello! Where would you like to fly?',
});
