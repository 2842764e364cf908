import { afterEach, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { doneOf, openSession, textOf, turn } from '../helpers/session.js';

/** Something the user says that no other part of the system would print. */
const USER_TEXT = 'Celsius, please; my locker code is 4711-zebra.';

describe('LOG_CONTENT', () => {
  let t: TestServer | undefined;
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });

  /** Runs one tool turn and returns the reply text and every log line as text. */
  async function chat(logContent: 'true' | 'false'): Promise<{ reply: string; logs: string }> {
    t = await startTestServer({ env: { LOG_CONTENT: logContent } });
    const c = await openSession(t, 'character=weather');
    const events = await turn(c, USER_TEXT);
    expect(doneOf(events).status).toBe('completed');
    await c.close();
    return { reply: textOf(events), logs: JSON.stringify(t.logs()) };
  }

  it('keeps user and model text out of the logs when off, logging lengths instead', async () => {
    const { reply, logs } = await chat('false');
    expect(reply).toBe("Checking Glasgow. It's 5 °C and windy in Glasgow right now.");
    expect(logs).not.toContain('4711-zebra');
    expect(logs).not.toContain('Checking Glasgow');
    expect(logs).not.toContain('right now');
    const done = t!.logs().find((l) => l.msg === 'response done');
    expect(done).toMatchObject({ text: { chars: reply.length }, status: 'completed' });
  });

  it('logs user and model text when on', async () => {
    const { reply, logs } = await chat('true');
    expect(logs).toContain('4711-zebra');
    expect(logs).toContain(JSON.stringify(reply).slice(1, -1));
  });
});
