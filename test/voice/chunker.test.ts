import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors.js';
import type { SpeechChunkerOptions } from '../../src/voice/chunker.js';
import { SpeechChunker, cleanForSpeech } from '../../src/voice/chunker.js';

/** All segments of `text` pushed in one delta. */
function chunk(text: string, options?: SpeechChunkerOptions): string[] {
  const chunker = new SpeechChunker(options);
  return [...chunker.push(text), ...chunker.flush()];
}

/** All segments of `text` pushed as the given deltas. */
function chunkDeltas(deltas: string[], options?: SpeechChunkerOptions): string[] {
  const chunker = new SpeechChunker(options);
  return [...deltas.flatMap((d) => chunker.push(d)), ...chunker.flush()];
}

/** Splits like an LLM tokenizer would, roughly: words with their leading space, punctuation apart. */
function tokens(text: string): string[] {
  return text.match(/\s*[\p{L}\p{N}']+|\s*[^\s\p{L}\p{N}']|\s+/gu) ?? [];
}

/** A fixed-seed PRNG so failures repeat. */
function rng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1_664_525) + 1_013_904_223) >>> 0;
    return state / 0x1_0000_0000;
  };
}

describe('SpeechChunker splitting', () => {
  it('splits at sentence ends followed by a space', () => {
    expect(chunk('Hello there! How are you? I am fine. Thanks.')).toEqual([
      'Hello there!',
      'How are you?',
      'I am fine.',
      'Thanks.',
    ]);
  });

  it('sends the first clause out as soon as it reaches firstMinChars', () => {
    expect(chunk('Well, the weather in Paris is lovely today, sunny and warm.')).toEqual([
      'Well, the weather in Paris is lovely today,',
      'sunny and warm.',
    ]);
    expect(chunk('Of course, let me look.', { firstMinChars: 5 })).toEqual([
      'Of course,',
      'let me look.',
    ]);
  });

  it('splits later clauses only once they reach minChars', () => {
    const text =
      'Sure thing, here it is. First, a short one; then a much longer clause that keeps going, and more.';
    expect(chunk(text)).toEqual([
      'Sure thing, here it is.',
      'First, a short one; then a much longer clause that keeps going,',
      'and more.',
    ]);
    expect(chunk(text, { minChars: 15 })).toEqual([
      'Sure thing, here it is.',
      'First, a short one;',
      'then a much longer clause that keeps going,',
      'and more.',
    ]);
  });

  it('splits at semicolons, colons and dashes, but not inside ranges', () => {
    expect(
      chunk('The answer is simple: go now — and do not look back.', {
        firstMinChars: 10,
        minChars: 10,
      }),
    ).toEqual(['The answer is simple:', 'go now — and do not look back.']);
    expect(
      chunk('It ran from 1990–2000 and was loved by millions of people.', { firstMinChars: 5 }),
    ).toEqual(['It ran from 1990–2000 and was loved by millions of people.']);
  });

  it('cuts a segment with no punctuation at a space once it passes maxChars', () => {
    const words = Array.from({ length: 60 }, (_, i) => `word${i}`).join(' ');
    const segments = chunk(words, { maxChars: 50 });
    expect(segments.length).toBeGreaterThan(5);
    for (const s of segments) expect(s.length).toBeLessThanOrEqual(50);
    expect(segments.join(' ')).toBe(words);
    // A single word longer than maxChars is cut at the first space after it.
    expect(chunk(`${'x'.repeat(30)} tail end`, { maxChars: 10 })).toEqual([
      'x'.repeat(30),
      'tail end',
    ]);
  });

  it('does not split decimals, times, thousands or URLs', () => {
    expect(
      chunk('It costs 3.5 euros, about 10,000 yen, at 10:30 today on example.com/page now.'),
    ).toEqual(['It costs 3.5 euros,', 'about 10,000 yen, at 10:30 today on example.com/page now.']);
  });

  it('does not split after abbreviations and initials', () => {
    expect(
      chunk(
        'Mr. Smith and Dr. Jones met in the U.S. last week. J. K. Rowling wrote, e.g., books. Done.',
      ),
    ).toEqual([
      'Mr. Smith and Dr. Jones met in the U.S. last week.',
      'J. K. Rowling wrote, e.g., books.',
      'Done.',
    ]);
  });

  it('splits after etc. only when a capitalised word follows', () => {
    const text = 'Apples, pears, etc. are fine. We have apples, pears, etc. Then we go.';
    expect(chunk(text, { firstMinChars: 40 })).toEqual([
      'Apples, pears, etc. are fine.',
      'We have apples, pears, etc.',
      'Then we go.',
    ]);
  });

  it('does not split at an ellipsis in the middle of a sentence', () => {
    expect(chunk('Well... I think so. Hmm… maybe not. I wonder... Anyway, bye.')).toEqual([
      'Well... I think so.',
      'Hmm… maybe not.',
      'I wonder...',
      'Anyway, bye.',
    ]);
  });

  it('keeps closing quotes and brackets with their sentence', () => {
    expect(chunk('He said "Stop!" Then he left. (It was late.) The end.')).toEqual([
      'He said "Stop!"',
      'Then he left.',
      '(It was late.)',
      'The end.',
    ]);
  });

  it('splits CJK text at its own sentence and clause marks', () => {
    expect(chunk('你好。今天天气很好，我们去公园吧！好的？', { minChars: 3 })).toEqual([
      '你好。',
      '今天天气很好，',
      '我们去公园吧！',
      '好的？',
    ]);
    expect(chunk('こんにちは。元気ですか？')).toEqual(['こんにちは。', '元気ですか？']);
  });

  it('treats a line break as the end of a segment', () => {
    expect(chunk('First line\nSecond line\n\n\nThird')).toEqual([
      'First line',
      'Second line',
      'Third',
    ]);
  });
});

describe('SpeechChunker cleaning', () => {
  it('removes emphasis, strike and inline code markers but keeps their text', () => {
    expect(
      chunk('This is **bold**, *italic*, ***both***, __under__, _it_, ~~gone~~ and `code`.', {
        firstMinChars: 100,
      }),
    ).toEqual(['This is bold, italic, both, under, it, gone and code.']);
    expect(chunk('Keep snake_case and my_var_name as they are.')).toEqual([
      'Keep snake_case and my_var_name as they are.',
    ]);
  });

  it('removes a ** that arrives split across deltas', () => {
    expect(chunkDeltas(['The ', '*', '*', 'answer', '*', '*', ' is 42.'])).toEqual([
      'The answer is 42.',
    ]);
    expect(chunkDeltas(['A ', '_', '_', 'b', '_', '_', ' c.'])).toEqual(['A b c.']);
  });

  it('drops fenced code blocks entirely', () => {
    expect(
      chunk(
        'Here is the code:\n```python\nprint("hello. world")\nx = 1\n```\nRun it.\n~~~\nmore\n~~~\nBye.',
      ),
    ).toEqual(['Here is the code:', 'Run it.', 'Bye.']);
    expect(chunk('Inline fence:```js\nalert(1)\n```\nAfter.')).toEqual(['Inline fence:', 'After.']);
    expect(chunk('Unclosed:\n```\ncode runs to the end')).toEqual(['Unclosed:']);
  });

  it('strips headings, bullets, numbers and block quotes at the start of a line', () => {
    expect(
      chunk(
        '# Title\n## Sub title\n- one\n* two\n+ three\n• four\n1. five\n2) six\n> quoted\n> > deeper\n- [ ] task\n- [x] done',
      ),
    ).toEqual([
      'Title',
      'Sub title',
      'one',
      'two',
      'three',
      'four',
      'five',
      'six',
      'quoted',
      'deeper',
      'task',
      'done',
    ]);
    // Only at the start of a line.
    expect(chunk('Use C# and 1. not a list - really.')).toEqual([
      'Use C# and 1.',
      'not a list - really.',
    ]);
  });

  it('reads links as their text and drops images, footnotes and bare URLs', () => {
    expect(
      chunk('See [the forecast](https://example.com/a_(b)) and ![a map](m.png) here[1].'),
    ).toEqual(['See the forecast and here.']);
    expect(
      chunk('Go to https://example.com/x?y=1, or www.example.org. Then <https://a.b> rest.'),
    ).toEqual(['Go to, or.', 'Then rest.']);
    expect(chunk('A [**bold link**](u) and [plain brackets] stay.')).toEqual([
      'A bold link and plain brackets stay.',
    ]);
  });

  it('removes HTML tags and decodes entities as literal text', () => {
    expect(chunk('<p>Hello <b>there</b></p><br>next &amp; last &lt;b&gt; &#8212; ok.')).toEqual([
      'Hello there',
      'next & last <b> — ok.',
    ]);
    expect(chunk('2 < 3 and 5 > 4.')).toEqual(['2 < 3 and 5 > 4.']);
  });

  it('turns table rows into lines and drops the separator row', () => {
    expect(chunk('| City | Temp |\n|---|:---:|\n| Paris | 24 |\n| Rome | 28 |')).toEqual([
      'City, Temp',
      'Paris, 24',
      'Rome, 28',
    ]);
  });

  it('removes emoji, flags, skin tones, keycaps and ZWJ sequences', () => {
    expect(chunk('Hi 👋🏽! Sunny ☀️ in 🇫🇷 with the 👨‍👩‍👧‍👦 family, press 1️⃣ now ✅.')).toEqual([
      'Hi!',
      'Sunny in with the family, press 1 now.',
    ]);
    expect(chunk('🎉🎉🎉')).toEqual([]);
  });

  it('drops tool-call markup that models leak into text', () => {
    expect(
      chunk('Let me check.<tool_call>{"name": "get_weather", "arguments": {}}</tool_call> Done.'),
    ).toEqual(['Let me check.', 'Done.']);
    expect(
      chunk('One moment.<|python_tag|>{"name": "get_weather", "parameters": {}}<|eom_id|>'),
    ).toEqual(['One moment.']);
    expect(chunk('Checking. [TOOL_CALLS] [{"name": "get_weather", "arguments": {}}]')).toEqual([
      'Checking.',
    ]);
    expect(chunk('Okay <function=get_weather>{"city": "Paris"}</function> done.')).toEqual([
      'Okay done.',
    ]);
    expect(chunk('<think>The user wants rain data.</think>It will rain.')).toEqual([
      'It will rain.',
    ]);
    expect(chunk('Sure <|tool_call|>[{"name":"x"}]<|/tool_call|>thing.')).toEqual(['Sure thing.']);
  });

  it('collapses whitespace and returns no empty or punctuation-only segments', () => {
    expect(chunk('  Lots   of \t space\u00a0here.   \n\n  ')).toEqual(['Lots of space here.']);
    expect(chunk('... --- !!! ?')).toEqual([]);
    expect(chunk('Hi. — . ! Bye.')).toEqual(['Hi.', 'Bye.']);
    expect(chunk('')).toEqual([]);
  });
});

describe('SpeechChunker streaming', () => {
  const texts = [
    'Sure, let me check that for you. The weather in **Paris** is sunny, with a high of 24.5 degrees; the wind is light. Mr. Smith said it would rain at 10:30 a.m. tomorrow, but I doubt it… Honestly, who knows! 🌦️',
    '## Weather today\n\n- **Paris**: sunny 🌞, 24 °C\n- *London*: rain 🌧️\n1. First item\n\n> A quote here.\n\nSee [the forecast](https://example.com/a_(b)) or https://meteo.fr/paris.\n```python\nprint("hi")\n```\nDone! 👨‍👩‍👧 🇫🇷',
    'I will look that up.<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call> One moment. Okay <function=f>{}</function> <|python_tag|>{"x": 1}',
    '| City | Temp |\n|---|---|\n| Paris | 24 |\nWell... I think so. The U.S. economy grew 3.5% in 2024, e.g., in tech — 1990–2000 &amp; more. Apples, etc. Then `x` and snake_case.',
    '你好。今天天气很好，我们去公园吧！<b>Bold</b> and <br/> a [TOOL_CALLS] [{"name": "x"}]',
    'A long sentence without punctuation that goes on and on about Paris and London and Rome and Berlin and Madrid and Lisbon and Vienna and Prague and Warsaw and Budapest and Athens',
  ];

  it('gives the same segments for every two-way split of the text', () => {
    for (const text of texts) {
      const whole = chunk(text, { maxChars: 80 });
      expect(whole.length).toBeGreaterThan(0);
      for (let k = 1; k < text.length; k++) {
        expect(
          chunkDeltas([text.slice(0, k), text.slice(k)], { maxChars: 80 }),
          `split at ${k}`,
        ).toEqual(whole);
      }
    }
  });

  it('gives the same segments one UTF-16 unit at a time, by token and in random pieces', () => {
    const random = rng(42);
    for (const text of texts) {
      const whole = chunk(text);
      expect(chunkDeltas(text.split(''))).toEqual(whole);
      expect(chunkDeltas(tokens(text))).toEqual(whole);
      for (let r = 0; r < 50; r++) {
        const deltas: string[] = [];
        for (let at = 0; at < text.length;) {
          const size = 1 + Math.floor(random() * 12);
          deltas.push(text.slice(at, at + size));
          at += size;
        }
        expect(chunkDeltas(deltas), deltas.join('|')).toEqual(whole);
      }
    }
  });

  it('returns the first segment from the very delta that completes the first clause', () => {
    const reply =
      'Sure, no problem at all, the weather in Paris is sunny today. It will stay warm.';
    const chunker = new SpeechChunker();
    const deltas = tokens(reply);
    const got: string[] = [];
    let firstAt = -1;
    deltas.forEach((delta, index) => {
      const out = chunker.push(delta);
      if (out.length > 0 && firstAt < 0) firstAt = index;
      got.push(...out);
    });
    // "Sure," is too short; after "all," the next token (" the") brings the space that proves it.
    expect(deltas.slice(0, firstAt + 1).join('')).toBe('Sure, no problem at all, the');
    expect(got[0]).toBe('Sure, no problem at all,');
    expect([...got, ...chunker.flush()]).toEqual([
      'Sure, no problem at all,',
      'the weather in Paris is sunny today.',
      'It will stay warm.',
    ]);
  });

  it('gives a sentence out when the next word starts, before the reply ends', () => {
    const chunker = new SpeechChunker();
    expect(chunker.push('Hello!')).toEqual([]);
    expect(chunker.push(' How')).toEqual(['Hello!']);
    expect(chunker.push(' are you?')).toEqual([]);
    expect(chunker.flush()).toEqual(['How are you?']);
  });

  it('starts each reply afresh after flush(), and reset() drops what is held', () => {
    const chunker = new SpeechChunker();
    chunker.push('The first reply is here, and it is long enough to split');
    expect(chunker.flush()).toEqual(['and it is long enough to split']);
    // The first clause of the next reply uses firstMinChars again, and no markup state leaks.
    chunker.push('```\ncode');
    chunker.reset();
    expect(chunker.push('Second reply, short one. ')).toEqual(['Second reply,', 'short one.']);
    expect(chunker.flush()).toEqual([]);
  });

  it('keeps up with a long reply fed one character at a time', () => {
    const chunker = new SpeechChunker();
    const started = performance.now();
    let segments = 0;
    let chars = 0;
    for (let round = 0; round < 20; round++) {
      // One reply per text: some end in a leaked tool call that drops the rest of their reply.
      for (const text of texts) {
        for (const ch of text) segments += chunker.push(ch).length;
        segments += chunker.flush().length;
        chars += text.length;
      }
    }
    const elapsedMs = performance.now() - started;
    console.log(
      `chunker: ${chars} chars one at a time → ${segments} segments in ${elapsedMs.toFixed(1)} ms ` +
        `(${((elapsedMs * 1000) / chars).toFixed(2)} µs per char)`,
    );
    expect(segments).toBeGreaterThan(100);
    expect(elapsedMs).toBeLessThan(2000);
  });
});

describe('SpeechChunker input checks', () => {
  it('ignores null and undefined deltas and rejects other non-text', () => {
    const chunker = new SpeechChunker();
    expect(chunker.push(undefined as unknown as string)).toEqual([]);
    expect(chunker.push(null as unknown as string)).toEqual([]);
    expect(() => chunker.push(42 as unknown as string)).toThrow(/takes text, got number/);
  });

  it('rejects negative or NaN lengths with a ConfigError', () => {
    expect(() => new SpeechChunker({ minChars: -1 })).toThrow(ConfigError);
    expect(() => new SpeechChunker({ maxChars: Number.NaN })).toThrow(/maxChars/);
    expect(() => new SpeechChunker({ firstMinChars: Infinity, maxChars: Infinity })).not.toThrow();
  });
});

describe('cleanForSpeech', () => {
  it('cleans a whole string in one go', () => {
    expect(cleanForSpeech('**Hi!** 👋 See [the docs](https://x.dev).')).toBe('Hi! See the docs.');
    expect(cleanForSpeech('# Welcome\nI am *Bob*, your guide.')).toBe(
      'Welcome I am Bob, your guide.',
    );
    expect(cleanForSpeech('Thinking…<tool_call>{}</tool_call>')).toBe('Thinking…');
    expect(cleanForSpeech('🙂')).toBe('');
  });

  it('does not split long text', () => {
    const long = 'word, '.repeat(100) + 'end.';
    expect(cleanForSpeech(long)).toBe(long);
  });
});

describe('SpeechChunker word by word (unit: word)', () => {
  it('gives out each word as soon as the space after it arrives', () => {
    const chunker = new SpeechChunker({ unit: 'word' });
    expect(chunker.push('Sure, the wea')).toEqual(['Sure,', 'the']);
    expect(chunker.push('ther in Par')).toEqual(['weather', 'in']);
    expect(chunker.push('is is 3.5 degrees.')).toEqual(['Paris', 'is', '3.5']);
    expect(chunker.flush()).toEqual(['degrees.']);
  });

  it('still cleans markdown, emoji, links and leaked tool-call text', () => {
    const text =
      'The **forecast** 🌞 says [sun](https://example.com) <tool_call>{"name":"x"}</tool_call>today.';
    const expected = ['The', 'forecast', 'says', 'sun', 'today.'];
    expect(chunk(text, { unit: 'word' })).toEqual(expected);
    expect(chunkDeltas(tokens(text), { unit: 'word' })).toEqual(expected);
  });

  it('speaks the same words as clause mode, however the deltas fall', () => {
    const text = 'Well, *that* is odd; Dr. Smith paid $4.50 at 3:30 p.m. for `code` — really!';
    // (A dash alone is no word: it is not spoken.)
    const words = chunk(text)
      .join(' ')
      .split(' ')
      .filter((w) => /[\p{L}\p{N}]/u.test(w));
    expect(chunkDeltas(tokens(text), { unit: 'word' })).toEqual(words);
  });

  it('refuses an unknown unit', () => {
    expect(() => new SpeechChunker({ unit: 'syllable' as 'word' })).toThrow(ConfigError);
  });
});
