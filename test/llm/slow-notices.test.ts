/**
 * Slow notices on both transports: the default one keeps them on its own
 * clock, the openai package's gets the turn runner's watch. Either way the
 * notice comes while the model is silent, and the reply follows whole.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createLlmClient } from '../../src/llm/client.js';
import { runTurn, type TurnEvent } from '../../src/llm/turn-runner.js';
import { NO_TOOLS } from '../../src/tools/library.js';
import { createMemoryLogger } from '../../src/testing/memory-logger.js';
import { TRANSPORTS, conversation } from '../helpers/turn.js';

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((r) => (server ? server.close(r) : r(undefined)));
  server = undefined;
});

const chunk = (content: string) =>
  `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;

describe.each(TRANSPORTS)('slow notices (%s transport)', (transport) => {
  it('come before the first chunk and between chunks, and the text is whole', async () => {
    // The server waits for the turn's notices before each part: no fixed times.
    const gates: Array<() => void> = [];
    const gate = () => new Promise<void>((r) => gates.push(r));
    server = createServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.flushHeaders();
      void (async () => {
        await gate();
        res.write(chunk('Hello, '));
        await gate();
        res.end(chunk('world.') + 'data: [DONE]\n\n');
      })();
    });
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
    const llm = await createLlmClient({ baseURL: url, model: 'm', slowNoticeMs: 30, transport });
    const events: TurnEvent[] = [];
    // The first part after the first notice, the second after a notice that follows text.
    let released = 0;
    let sawText = false;
    for await (const e of runTurn({
      llm,
      messages: conversation('hi'),
      toolset: NO_TOOLS,
      signal: new AbortController().signal,
      session: { id: 's', character: 'c', state: {} },
      log: createMemoryLogger(),
    })) {
      events.push(e);
      if (e.type === 'text.delta') sawText = true;
      if (e.type === 'llm.slow' && (released === 0 || (released === 1 && sawText))) {
        // A notice that comes before the server waits (its request still on the way) opens nothing.
        const open = gates.shift();
        if (open) {
          released++;
          open();
        }
      }
    }
    const kinds = events.map((e) => e.type).filter((k) => k === 'llm.slow' || k === 'text.delta');
    // At least one notice before each part (more if the machine is slow to answer).
    expect(kinds[0]).toBe('llm.slow');
    const firstText = kinds.indexOf('text.delta');
    expect(kinds.slice(firstText + 1)).toContain('llm.slow');
    const text = events.flatMap((e) => (e.type === 'text.delta' ? [e.delta] : [])).join('');
    expect(text).toBe('Hello, world.');
    expect(events.at(-1)).toMatchObject({ type: 'finish', summary: { status: 'completed' } });
  });
});
