/**
 * Send-time stamps: `stampText` / `readStamps` on their own, and a simulator
 * started with `stamp: true` ending every streamed text fragment with the
 * moment it wrote it (and nothing else stamped).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChunkLike } from '../../src/llm/chunk.js';
import {
  PROFILE_NAMES,
  epochNow,
  readStamps,
  startSimulator,
  stampText,
} from '../../src/testing/simulator/index.js';
import type { SimScript, Simulator } from '../../src/testing/simulator/index.js';
import { WEATHER_TOOL, ask, postChat, streamChat, textOf, toolChunks } from './sim-helpers.js';

const REPLY_TEXT = 'The weather in Paris is sunny and mild, with a light breeze from the west.';

const SCRIPT: SimScript = {
  rules: [
    {
      when: { user: 'paris' },
      reply: {
        parts: [
          { text: 'Let me check. ' },
          { toolCall: { name: 'get_current_weather', arguments: { location: 'Paris' } } },
        ],
      },
    },
    {
      when: { user: 'think' },
      reply: { parts: [{ reasoning: 'They want the weather.' }, { text: REPLY_TEXT }] },
    },
  ],
  fallback: { parts: [{ text: REPLY_TEXT }] },
};

/** One stamp, anchored: a stamped fragment ends with exactly this. */
const STAMP_AT_END = /⟦t=\d+\.\d{3}⟧$/;

/** A chunk and the moment (epochNow) its bytes were read. */
interface Timed {
  chunk: ChunkLike;
  receivedAt: number;
}

/**
 * Streams a chat request, noting when each chunk arrived; `sentAt` is taken
 * just before the request goes out.
 */
async function streamTimed(
  sim: Simulator,
  body: Record<string, unknown>,
): Promise<{ sentAt: number; chunks: Timed[]; done: boolean }> {
  const sentAt = epochNow();
  const res = await postChat(sim, { model: 'sim-model', stream: true, ...body });
  expect(res.status).toBe(200);
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  const chunks: Timed[] = [];
  let buffer = '';
  let done = false;
  for (;;) {
    const read = await reader.read();
    const receivedAt = epochNow();
    if (read.done) break;
    buffer += decoder.decode(read.value, { stream: true });
    let end = buffer.indexOf('\n\n');
    while (end >= 0) {
      const data = buffer.slice(0, end).replace(/^data: /, '');
      buffer = buffer.slice(end + 2);
      if (data === '[DONE]') done = true;
      else chunks.push({ chunk: JSON.parse(data) as ChunkLike, receivedAt });
      end = buffer.indexOf('\n\n');
    }
  }
  return { sentAt, chunks, done };
}

function contentOf(chunk: ChunkLike): string | null | undefined {
  return chunk.choices?.[0]?.delta?.content;
}

/** The chunks whose delta carries non-empty text. */
function textChunks(chunks: readonly ChunkLike[]): ChunkLike[] {
  return chunks.filter((c) => {
    const content = contentOf(c);
    return typeof content === 'string' && content !== '';
  });
}

describe('stampText and readStamps', () => {
  it('writes a stamp as epoch milliseconds with three decimals', () => {
    expect(stampText('Hello', 1_795_313_277_260.125)).toBe('Hello⟦t=1795313277260.125⟧');
    expect(stampText('', 5)).toBe('⟦t=5.000⟧');
    expect(stampText('x', 1.23456)).toBe('x⟦t=1.235⟧');
  });

  it('reads back several stamps in order, leaving the text as it was', () => {
    const times = [1_795_313_277_260.125, 1_795_313_277_261.5, 1_795_313_277_270];
    const fragments = ['Hello', ', wor', 'ld!'];
    const stamped = fragments.map((f, i) => stampText(f, times[i]!)).join('');

    expect(readStamps(stamped)).toEqual({ text: 'Hello, world!', sentAt: times });
  });

  it('reads a stamp with an empty fragment and one without decimals', () => {
    expect(readStamps('⟦t=5.000⟧ there⟦t=6⟧')).toEqual({ text: ' there', sentAt: [5, 6] });
  });

  it('leaves unstamped text alone', () => {
    for (const text of ['', 'plain text', 'brackets ⟦like these⟧', '⟦t=soon⟧', '⟦t=-1⟧', '[t=5]']) {
      expect(readStamps(text)).toEqual({ text, sentAt: [] });
    }
  });

  it('keeps reading after a call that found stamps (no stale regex state)', () => {
    const one = stampText('a', 1);
    expect(readStamps(one).sentAt).toEqual([1]);
    expect(readStamps(one).sentAt).toEqual([1]);
    expect(readStamps(`${one}${stampText('b', 2)}`).sentAt).toEqual([1, 2]);
  });
});

describe('epochNow', () => {
  it('reads epoch milliseconds with sub-millisecond precision', () => {
    const before = Date.now();
    const a = epochNow();
    const b = epochNow();
    const after = Date.now();
    expect(b).toBeGreaterThanOrEqual(a);
    // Bracketed by the wall clock, so a stall between the reads cannot fail it.
    expect(a).toBeGreaterThanOrEqual(before - 1_000);
    expect(a).toBeLessThanOrEqual(after + 1_000);
    const fractional = Array.from({ length: 20 }, () => epochNow()).some((t) => t % 1 !== 0);
    expect(fractional).toBe(true);
  });
});

describe('a simulator with stamp: true', () => {
  let stamped: Simulator;
  let plain: Simulator;

  beforeAll(async () => {
    // Paced, so the chunks leave (and arrive) at different moments.
    const latency = { ttftMs: 5, tokensPerSec: 1_000 };
    stamped = await startSimulator({ stamp: true, script: SCRIPT, latency });
    plain = await startSimulator({ script: SCRIPT, latency });
  });

  afterAll(async () => {
    await Promise.all([stamped.close(), plain.close()]);
  });

  it('ends every text chunk with one stamp between the request and the chunk arriving', async () => {
    const { sentAt, chunks, done } = await streamTimed(stamped, { messages: ask('hi') });

    expect(done).toBe(true);
    const texts = chunks.filter((t) => textChunks([t.chunk]).length === 1);
    expect(texts.length).toBeGreaterThan(5);
    for (const { chunk, receivedAt } of texts) {
      const content = contentOf(chunk) as string;
      expect(content).toMatch(STAMP_AT_END);
      const read = readStamps(content);
      expect(read.sentAt).toHaveLength(1);
      expect(read.text).not.toBe('');
      const stampAt = read.sentAt[0]!;
      expect(stampAt).toBeGreaterThanOrEqual(sentAt);
      expect(stampAt).toBeLessThanOrEqual(receivedAt);
      // The stamp is the chunk's own send time, to the microsecond.
      expect(Math.abs(stampAt - chunk.x_sim_sent_at!)).toBeLessThanOrEqual(0.0005);
    }
    // Paced chunks leave in order, so their stamps do too.
    const stamps = texts.map((t) => readStamps(contentOf(t.chunk) as string).sentAt[0]!);
    expect(stamps).toEqual([...stamps].sort((a, b) => a - b));
  });

  it("streams the script's text once the stamps are taken out", async () => {
    const { chunks } = await streamChat(stamped, { messages: ask('hi') });
    const joined = textOf(chunks);
    expect(joined).not.toBe(REPLY_TEXT);
    expect(readStamps(joined).text).toBe(REPLY_TEXT);
    expect(readStamps(joined).sentAt).toHaveLength(textChunks(chunks).length);
  });

  it('stamps neither the role chunk nor the tool-call chunks', async () => {
    const { chunks } = await streamChat(stamped, {
      messages: ask('Weather in Paris?'),
      tools: [WEATHER_TOOL],
    });

    expect(chunks[0]?.choices?.[0]?.delta).toEqual({ role: 'assistant', content: '' });
    const calls = toolChunks(chunks);
    expect(calls.length).toBeGreaterThan(1);
    for (const c of calls) expect(JSON.stringify(c.choices)).not.toContain('⟦');
    for (const c of chunks.filter((c) => textChunks([c]).length === 0)) {
      expect(JSON.stringify(c)).not.toContain('⟦');
    }
    expect(readStamps(textOf(chunks)).text).toBe('Let me check. ');
  });

  it('does not stamp reasoning', async () => {
    stamped.setProfile('vllm-hermes');
    try {
      const { chunks } = await streamChat(stamped, { messages: ask('think first') });
      const reasoning = chunks
        .map((c) => c.choices?.[0]?.delta as { reasoning_content?: string } | undefined)
        .flatMap((d) => (typeof d?.reasoning_content === 'string' ? [d.reasoning_content] : []));
      expect(reasoning.join('')).toBe('They want the weather.');
      expect(readStamps(textOf(chunks)).text).toBe(REPLY_TEXT);
    } finally {
      stamped.setProfile('openai');
    }
  });

  it.each(PROFILE_NAMES)('stamps each text fragment once with the %s profile', async (profile) => {
    stamped.setProfile(profile);
    try {
      const { chunks } = await streamChat(stamped, { messages: ask('hi') });
      const texts = textChunks(chunks);
      expect(texts.length).toBeGreaterThan(1);
      for (const c of texts) {
        expect(contentOf(c)).toMatch(STAMP_AT_END);
        expect(readStamps(contentOf(c) as string).sentAt).toHaveLength(1);
      }
      expect(readStamps(textOf(chunks)).text).toBe(REPLY_TEXT);
    } finally {
      stamped.setProfile('openai');
    }
  });

  it('does not stamp a reply that is not streamed', async () => {
    const res = await postChat(stamped, { model: 'sim-model', messages: ask('hi') });
    const body = (await res.json()) as { choices: Array<{ message: { content: string } }> };
    expect(body.choices[0]?.message.content).toBe(REPLY_TEXT);
  });

  it('stamps nothing without the option', async () => {
    const text = await streamChat(plain, { messages: ask('hi') });
    expect(textOf(text.chunks)).toBe(REPLY_TEXT);
    expect(text.raw).not.toContain('⟦');

    const tools = await streamChat(plain, {
      messages: ask('Weather in Paris?'),
      tools: [WEATHER_TOOL],
    });
    expect(textOf(tools.chunks)).toBe('Let me check. ');
    expect(tools.raw).not.toContain('⟦');
  });
});
