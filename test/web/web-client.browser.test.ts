/**
 * The web client (src/web) in headless Chromium against the real server and
 * the LLM simulator running the demo script: what a user sees when they pick
 * a character, chat, watch tools run, stop a reply, and lose the connection.
 *
 * Every wait is on a DOM condition (a locator or expect.poll), never a sleep.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { chromium } from 'playwright-core';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { startTestServer } from '../helpers/server.js';

type TestServer = Awaited<ReturnType<typeof startTestServer>>;

/** Chromium to drive; Debian's package by default. */
const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
/** How long a DOM condition may take before the test fails (well inside the 60 s test timeout). */
const WAIT_MS = 10_000;
const POLL = { timeout: WAIT_MS, interval: 50 };

/** Demo-script lines (src/testing/scripts/demo.ts) and what the simulator answers. */
const WEATHER_CLARIFY = "What's the weather in Glasgow?";
const WEATHER_CLARIFY_REPLY = 'Sure — in celsius or fahrenheit?';
const WEATHER_CELSIUS = 'Celsius, please.';
const WEATHER_CELSIUS_BEFORE_TOOL = 'Checking Glasgow.';
const WEATHER_CELSIUS_REPLY = "It's 5 °C and windy in Glasgow right now.";
const QUIZ_START = "Let's do a quiz!";
const QUIZ_START_REPLY = 'First question: what is the capital of France?';

let browser: Browser;
let contexts: BrowserContext[] = [];
let pageErrors: string[] = [];

beforeAll(async () => {
  browser = await chromium.launch({
    executablePath: CHROMIUM_PATH,
    headless: true,
    // Tests run as root, where Chromium's sandbox cannot start.
    args: ['--no-sandbox'],
  });
});

afterEach(async () => {
  await Promise.all(contexts.map((context) => context.close()));
  contexts = [];
  const errors = pageErrors;
  pageErrors = [];
  // An uncaught exception in app.js fails the test that caused it.
  expect(errors).toEqual([]);
});

afterAll(async () => {
  await browser?.close();
});

/** Opens the client in a fresh browser context (no shared storage between tests). */
async function openClient(
  baseUrl: string,
  query = '',
  viewport = { width: 1000, height: 800 },
): Promise<Page> {
  const context = await browser.newContext({ viewport });
  contexts.push(context);
  const page = await context.newPage();
  page.setDefaultTimeout(WAIT_MS);
  page.on('pageerror', (error) => pageErrors.push(error.message));
  await page.goto(`${baseUrl}/${query}`);
  return page;
}

/** Waits until the status shows an open connection. */
async function connected(page: Page): Promise<void> {
  await page.locator('[data-testid="status"][data-state="open"]').waitFor();
}

/** Types a line into the composer and presses Send. */
async function say(page: Page, text: string): Promise<void> {
  await page.getByTestId('send').and(page.locator(':enabled')).waitFor();
  await page.getByTestId('message-input').fill(text);
  await page.getByTestId('send').click();
}

/** The texts of the bubbles of one role, in order. */
function bubbles(page: Page, role: 'user' | 'assistant'): Promise<string[]> {
  return page
    .locator(`[data-testid="message"][data-role="${role}"] [data-testid="message-text"]`)
    .allTextContents();
}

/** Waits for the turn to end and returns its footer's status. */
async function turnStatus(page: Page, index = -1): Promise<string | null> {
  const footers = page.getByTestId('turn-meta');
  await expect.poll(() => footers.count(), POLL).toBeGreaterThan(index < 0 ? 0 : index);
  return (index < 0 ? footers.last() : footers.nth(index)).getAttribute('data-status');
}

/** The greeting each character's session opens with, as the server lists it. */
async function greetings(server: TestServer): Promise<Map<string, string>> {
  const response = await fetch(`${server.url}/v1/characters`);
  expect(response.status).toBe(200);
  const body = (await response.json()) as { characters: { id: string; greeting?: string }[] };
  return new Map(body.characters.map((c) => [c.id, c.greeting ?? '']));
}

/** What the page looked like at one moment of a turn. */
interface Snapshot {
  /** Text of the last assistant bubble. */
  text: string;
  sendDisabled: boolean;
  stopDisabled: boolean;
}

/**
 * Records a snapshot at every change of the transcript or the buttons, so a
 * test can tell that a reply arrived in pieces and what the buttons allowed
 * meanwhile, however fast the simulated turn runs.
 */
async function recordTurn(page: Page): Promise<void> {
  await page.evaluate(`(() => {
    window.__snapshots = [];
    const transcript = document.querySelector('[data-testid="transcript"]');
    const send = document.querySelector('[data-testid="send"]');
    const stop = document.querySelector('[data-testid="stop"]');
    const snap = () => {
      const texts = [...transcript.querySelectorAll(
        '[data-testid="message"][data-role="assistant"] [data-testid="message-text"]',
      )].map((element) => element.textContent);
      window.__snapshots.push({
        text: texts.at(-1) ?? '',
        sendDisabled: send.disabled,
        stopDisabled: stop.disabled,
      });
    };
    const observer = new MutationObserver(snap);
    observer.observe(transcript, { subtree: true, childList: true, characterData: true });
    observer.observe(send, { attributes: true });
    observer.observe(stop, { attributes: true });
  })()`);
}

/** Records every label the last tool card's outcome badge shows, in `window.__labels`. */
async function recordCardLabels(page: Page): Promise<void> {
  await page.evaluate(`(() => {
    window.__labels = [];
    const transcript = document.querySelector('[data-testid="transcript"]');
    const snap = () => {
      const badges = transcript.querySelectorAll('[data-testid="tool-outcome"]');
      const label = badges[badges.length - 1]?.textContent;
      if (label && badges.length > 1 && window.__labels.at(-1) !== label) window.__labels.push(label);
    };
    new MutationObserver(snap).observe(transcript, { subtree: true, childList: true, characterData: true });
  })()`);
}

function recordedTurn(page: Page): Promise<Snapshot[]> {
  return page.evaluate('window.__snapshots') as Promise<Snapshot[]>;
}

describe('web client', () => {
  let server: TestServer;
  let greetingOf: Map<string, string>;

  beforeAll(async () => {
    server = await startTestServer();
    greetingOf = await greetings(server);
  });

  afterAll(async () => {
    await server?.close();
  });

  it('shows the greeting, streams the reply and a tool card for get_current_weather', async () => {
    const page = await openClient(server.url);
    await connected(page);
    await page.getByTestId('character-select').selectOption('weather');
    await expect.poll(() => bubbles(page, 'assistant'), POLL).toEqual([greetingOf.get('weather')]);
    await connected(page);
    await recordTurn(page);

    await say(page, WEATHER_CELSIUS);

    const card = page.locator('[data-testid="tool-card"][data-name="get_current_weather"]');
    await expect.poll(() => card.getByTestId('tool-outcome').textContent(), POLL).toBe('ok');
    const durationMs = Number(await card.getByTestId('tool-duration').getAttribute('data-ms'));
    expect(durationMs).toBeGreaterThanOrEqual(0);
    expect(await card.getByTestId('tool-duration').textContent()).toMatch(/^\d+(\.\d)? ms$/);
    expect(JSON.parse((await card.getByTestId('tool-args').textContent()) ?? '')).toEqual({
      location: 'Glasgow, Scotland',
      format: 'celsius',
    });
    expect(await card.getByTestId('tool-output').textContent()).toContain('temperature');

    expect(await turnStatus(page)).toBe('completed');
    const assistant = await bubbles(page, 'assistant');
    expect(assistant.map((text) => text.trim())).toEqual([
      greetingOf.get('weather'),
      WEATHER_CELSIUS_BEFORE_TOOL,
      WEATHER_CELSIUS_REPLY,
    ]);
    // Reading order: the text before the call, the card, then the text after it.
    const order = await page
      .locator('[data-testid="transcript"] > *')
      .evaluateAll((elements) =>
        elements.map((e) => e.getAttribute('data-role') ?? e.getAttribute('data-testid')),
      );
    expect(order).toEqual([
      'assistant',
      'user',
      'assistant',
      'tool-card',
      'assistant',
      'turn-meta',
    ]);

    const snapshots = await recordedTurn(page);
    // The reply appeared piece by piece, not in one go...
    const partial = snapshots.filter(
      (s) => s.text && s.text !== WEATHER_CELSIUS_REPLY && WEATHER_CELSIUS_REPLY.startsWith(s.text),
    );
    expect(partial.length).toBeGreaterThan(0);
    // ...and while it did, Send was refused and Stop offered.
    expect(partial.filter((s) => !s.sendDisabled || s.stopDisabled)).toEqual([]);

    // The user's line shows exactly once (the local bubble and the server's echo are one).
    expect(await bubbles(page, 'user')).toEqual([WEATHER_CELSIUS]);
    expect(await page.getByTestId('send').isDisabled()).toBe(false);
    expect(await page.getByTestId('stop').isDisabled()).toBe(true);
    expect(await page.getByTestId('error').count()).toBe(0);
  });

  it('starts a fresh session when another character is picked', async () => {
    // Phone width: the whole flow must work in a narrow column too.
    const page = await openClient(server.url, '?character=weather', { width: 375, height: 700 });
    await connected(page);
    await expect.poll(() => bubbles(page, 'assistant'), POLL).toEqual([greetingOf.get('weather')]);
    await say(page, WEATHER_CLARIFY);
    expect(await turnStatus(page)).toBe('completed');
    expect((await bubbles(page, 'assistant')).at(-1)).toBe(WEATHER_CLARIFY_REPLY);

    await page.getByTestId('character-select').selectOption('quizmaster');
    // The old conversation is gone; the quizmaster greets a new session.
    await expect
      .poll(() => bubbles(page, 'assistant'), POLL)
      .toEqual([greetingOf.get('quizmaster')]);
    expect(await bubbles(page, 'user')).toEqual([]);
    await connected(page);
    expect(new URL(page.url()).searchParams.get('character')).toBe('quizmaster');
    expect(await page.getByTestId('character-tools').textContent()).toContain('start_quiz');

    await say(page, QUIZ_START);
    const card = page.locator('[data-testid="tool-card"][data-name="start_quiz"]');
    await expect.poll(() => card.getByTestId('tool-outcome').textContent(), POLL).toBe('ok');
    expect(await turnStatus(page)).toBe('completed');
    expect((await bubbles(page, 'assistant')).at(-1)).toBe(QUIZ_START_REPLY);
    expect(await page.getByTestId('tool-card').count()).toBe(1);
    // The narrow transcript overflows, and it follows the end of the conversation.
    const gap = `(() => {
      const t = document.querySelector('[data-testid="transcript"]');
      return t.scrollHeight > t.clientHeight ? t.scrollHeight - t.scrollTop - t.clientHeight : -1;
    })()`;
    await expect.poll(() => page.evaluate(gap), POLL).toBeLessThan(2);
    expect(await page.evaluate(gap)).toBeGreaterThanOrEqual(0);
  });

  it('stops a running response with the Stop button, and the next turn works', async () => {
    const page = await openClient(server.url, '?character=weather');
    await connected(page);
    await expect.poll(() => bubbles(page, 'assistant'), POLL).toHaveLength(1);

    // The model stops writing mid-reply and holds the stream open.
    server.simulator.injectFault({ type: 'stall', afterChunks: 3 });
    await say(page, WEATHER_CLARIFY);
    const stop = page.getByTestId('stop');
    await stop.and(page.locator(':enabled')).waitFor();
    await stop.click();

    expect(await turnStatus(page)).toBe('cancelled');
    expect(await page.getByTestId('turn-meta').last().textContent()).toContain('cancelled');
    expect(await stop.isDisabled()).toBe(true);

    await say(page, WEATHER_CELSIUS);
    expect(await turnStatus(page, 1)).toBe('completed');
    expect((await bubbles(page, 'assistant')).at(-1)).toBe(WEATHER_CELSIUS_REPLY);
  });

  it('says a tool is still being written until its arguments are complete, and that it did not run after Stop', async () => {
    const page = await openClient(server.url, '?character=weather');
    await connected(page);
    await expect.poll(() => bubbles(page, 'assistant'), POLL).toHaveLength(1);

    // The model stops in the middle of the tool call's arguments and holds the stream open.
    // (vLLM-style chunks: a role chunk, six of text, the call's header, then its arguments.)
    server.simulator.injectFault({ type: 'stall', afterChunks: 12 });
    await say(page, WEATHER_CELSIUS);
    const card = page.getByTestId('tool-card').last();
    await expect.poll(() => card.getByTestId('tool-args').textContent(), POLL).toMatch(/^\{"/);
    expect(await card.getByTestId('tool-outcome').textContent()).toBe('writing arguments…');
    expect(await card.getByTestId('tool-note').isVisible()).toBe(false);

    await page.getByTestId('stop').click();
    expect(await turnStatus(page)).toBe('cancelled');
    expect(await card.getByTestId('tool-outcome').textContent()).toBe('not run');
    const note = card.getByTestId('tool-note');
    expect(await note.isVisible()).toBe(true);
    expect(await note.textContent()).toContain('still writing these arguments');
    // The partial arguments stay visible: nothing the model wrote is hidden.
    expect(await card.getByTestId('tool-args').textContent()).toMatch(/^\{"/);

    // A complete call shows "running…" until its result, then the outcome.
    await recordCardLabels(page);
    await say(page, WEATHER_CELSIUS);
    await expect.poll(() => page.getByTestId('tool-card').count(), POLL).toBe(2);
    const done = page.getByTestId('tool-card').last();
    await expect.poll(() => done.getByTestId('tool-outcome').textContent(), POLL).toBe('ok');
    const labels = (await page.evaluate('window.__labels')) as string[];
    expect(labels).toEqual(expect.arrayContaining(['writing arguments…', 'running…', 'ok']));
    expect(labels.indexOf('running…')).toBeGreaterThan(labels.indexOf('writing arguments…'));
  });

  it('says so when ?character= names no character, and lists the ones there are', async () => {
    const page = await openClient(server.url, '?character=nosuch');
    await connected(page);
    const error = page.getByTestId('error').first();
    await error.waitFor();
    expect(await error.textContent()).toContain('This server has no character "nosuch"');
    expect(await error.textContent()).toMatch(/Characters: .*weather/);
    expect(await page.getByTestId('character-select').inputValue()).not.toBe('nosuch');
  });

  it('offers the variants of a character with several, and connects with the one picked', async () => {
    const page = await openClient(server.url, '?character=hello');
    await connected(page);
    const picker = page.getByTestId('variant-select');
    expect(await picker.isVisible()).toBe(true);
    const values = await picker
      .locator('option')
      .evaluateAll((options) => options.map((o) => (o as unknown as { value: string }).value));
    expect(values).toEqual(['', 'a', 'b']);
    await picker.selectOption('b');
    await expect.poll(() => page.url(), POLL).toContain('variant=b');
    await connected(page);
    const reloaded = await openClient(server.url, '?character=hello&variant=b');
    await connected(reloaded);
    expect(await reloaded.getByTestId('variant-select').inputValue()).toBe('b');

    // A character with one variant shows no menu.
    await page.getByTestId('character-select').selectOption('weather');
    await connected(page);
    expect(await picker.isVisible()).toBe(false);
    expect(page.url()).not.toContain('variant=');
  });

  it('shows an error the server reports and lets the user carry on', async () => {
    const page = await openClient(server.url, '?character=weather');
    await connected(page);
    await expect.poll(() => bubbles(page, 'assistant'), POLL).toHaveLength(1);

    // The model's stream breaks: the server reports an llm_error and fails the turn.
    server.simulator.injectFault({
      type: 'error-event',
      afterChunks: 1,
      message: 'model fell over',
    });
    await say(page, WEATHER_CLARIFY);

    const error = page.getByTestId('error').first();
    await error.waitFor();
    expect(await error.isVisible()).toBe(true);
    expect(await error.textContent()).not.toBe('');
    expect(await turnStatus(page)).toBe('failed');
    expect(await page.getByTestId('status').getAttribute('data-state')).toBe('open');

    await say(page, WEATHER_CELSIUS);
    expect(await turnStatus(page, 1)).toBe('completed');
  });
});

describe('web client connection', () => {
  const TOKEN = 'web-client-test-token';
  let server: TestServer;
  let serverClosed = false;

  beforeAll(async () => {
    // A small frame limit lets a typed message make the server close the socket (1009).
    server = await startTestServer({ env: { AUTH_TOKEN: TOKEN, MAX_FRAME_BYTES: '1024' } });
  });

  afterAll(async () => {
    if (!serverClosed) await server?.close();
  });

  it("connects with the page's ?token= and shows a refused connection's close code", async () => {
    const refused = await openClient(server.url, '?character=weather');
    const closeInfo = refused.getByTestId('close-info');
    await closeInfo.waitFor();
    expect(await closeInfo.getAttribute('data-code')).toBe('1008');
    const said = (await closeInfo.textContent()) ?? '';
    expect(said).toContain('add ?token=YOUR_TOKEN to the address');
    expect(said).not.toContain('))');
    expect(await refused.getByTestId('reconnect').isVisible()).toBe(true);
    expect(await refused.getByTestId('status').getAttribute('data-state')).toBe('closed');
    expect(await refused.getByTestId('send').isDisabled()).toBe(true);

    const page = await openClient(server.url, `?character=weather&token=${TOKEN}`);
    await connected(page);
    await expect.poll(() => bubbles(page, 'assistant'), POLL).toHaveLength(1);
    expect(await page.getByTestId('connection-banner').isVisible()).toBe(false);
  });

  it('shows why the server closed the socket and reconnects on request', async () => {
    const page = await openClient(server.url, `?character=weather&token=${TOKEN}`);
    await connected(page);
    await expect.poll(() => bubbles(page, 'assistant'), POLL).toHaveLength(1);

    await say(page, 'x'.repeat(4096));
    const closeInfo = page.getByTestId('close-info');
    await closeInfo.waitFor();
    expect(await closeInfo.getAttribute('data-code')).toBe('1009');
    expect(await closeInfo.textContent()).toContain('1009');

    await page.getByTestId('reconnect').click();
    await connected(page);
    // A new session: the greeting again, and the banner is gone.
    await expect.poll(() => bubbles(page, 'assistant'), POLL).toHaveLength(1);
    expect(await page.getByTestId('connection-banner').isVisible()).toBe(false);
    await say(page, WEATHER_CLARIFY);
    expect(await turnStatus(page)).toBe('completed');
  });

  it('shows that the server went away when it shuts down', async () => {
    const page = await openClient(server.url, `?character=weather&token=${TOKEN}`);
    await connected(page);
    serverClosed = true;
    await server.close();

    const closeInfo = page.getByTestId('close-info');
    await closeInfo.waitFor();
    expect(await closeInfo.getAttribute('data-code')).toBe('1001');
    expect(await page.getByTestId('reconnect').isVisible()).toBe(true);
    expect(await page.getByTestId('status').textContent()).toContain('1001');
  });
});
