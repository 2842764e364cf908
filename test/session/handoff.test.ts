import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Received, TestClient } from '../helpers/realtime-client.js';
import { say } from '../helpers/realtime-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { chatBodies, doneOf, openSession, textOf } from '../helpers/session.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(() => t.close());

/** A user message answered through a handoff: both responses' events, to the second `response.done`. */
async function handedOff(
  c: TestClient,
  text: string,
): Promise<{ first: Received[]; second: Received[] }> {
  say(c, text);
  const first = await c.untilDone();
  const second = await c.untilDone();
  return { first, second };
}

describe('handoffs between characters', () => {
  it('hands the user to weather, which answers the same message in its own response', async () => {
    const c = await openSession(t, 'character=concierge');
    const before = chatBodies(t.simulator).length;
    const { first, second } = await handedOff(c, 'Put me through for the weather in Glasgow.');

    // The transfer is a server-run call: an mcp_call item labelled with the old character.
    const call = doneOf(first).output.find((i) => i.type === 'mcp_call');
    expect(call).toMatchObject({
      name: 'transfer_to_weather',
      server_label: 'concierge',
      output: 'Transferred to Weather.',
    });
    expect(JSON.parse(call!.arguments as string)).toEqual({ reason: 'wants the weather' });
    expect(doneOf(first).status).toBe('completed');

    // Clients learn of the new character between the two responses.
    const updated = second.find((e) => e.type === 'session.updated');
    expect(updated?.session).toMatchObject({ character: 'weather' });
    expect(second.findIndex((e) => e.type === 'session.updated')).toBeLessThan(
      second.findIndex((e) => e.type === 'response.created'),
    );
    expect(textOf(second)).toBe('Sure — in celsius or fahrenheit?');
    expect(doneOf(second).status).toBe('completed');

    // The concierge was offered its transfers; weather its own tools, the user's message,
    // and none of the concierge's calls.
    const bodies = chatBodies(t.simulator).slice(before);
    expect(bodies).toHaveLength(2);
    expect(bodies[0]!.tools?.map((x) => x.function.name)).toEqual([
      'transfer_to_weather',
      'transfer_to_quizmaster',
      'transfer_to_narrator',
    ]);
    expect(bodies[0]!.tools?.[0]?.function.parameters).toMatchObject({
      type: 'object',
      properties: { reason: { type: 'string' } },
      required: ['reason'],
    });
    expect(bodies[1]!.tools?.map((x) => x.function.name)).toEqual([
      'get_current_weather',
      'get_n_day_weather_forecast',
    ]);
    expect(bodies[1]!.messages[0]).toMatchObject({ role: 'system' });
    expect(String(bodies[1]!.messages[0]!.content)).toContain("Don't make assumptions");
    // The conversation so far carries over (the concierge's greeting too), its calls left out.
    expect(bodies[1]!.messages.slice(1)).toEqual([
      { role: 'assistant', content: expect.stringMatching(/^Welcome!/) as unknown },
      { role: 'user', content: 'Put me through for the weather in Glasgow.' },
    ]);

    // The conversation goes on with weather, its tools and the history so far.
    say(c, 'Celsius, please.');
    const next = await c.untilDone();
    expect(textOf(next)).toMatch(/°C and .* in Glasgow right now\.$/);
    const last = chatBodies(t.simulator).at(-1)!;
    expect(
      last.messages.some(
        (m) => m.role === 'assistant' && m.content === 'Sure — in celsius or fahrenheit?',
      ),
    ).toBe(true);
    await c.close();
  });

  it('counts handoffs and logs them', async () => {
    const c = await openSession(t, 'character=concierge');
    await handedOff(c, "Let's do a quiz!");
    await t.waitForLog(
      'character handed off',
      (l) => l.from === 'concierge' && l.character === 'quizmaster',
    );
    const metrics = await (await fetch(`${t.url}/metrics`)).text();
    expect(metrics).toMatch(/troupe_handoffs_total\{from="concierge",to="quizmaster"\} [1-9]/);
    await c.close();
  });
});
