import { describe, expect, it, vi } from 'vitest';
import type { ChatMessage } from '../../src/llm/chunk.js';
import { estimateTokens } from '../../src/llm/token-estimate.js';
import { History, parseGroup } from '../../src/session/history.js';
import type { Item } from '../../src/session/events.js';
import type { HistoryState } from '../../src/session/session-state.js';

const text = (id: string, role: 'user' | 'assistant', body: string): Item => ({
  id,
  object: 'realtime.item',
  type: 'message',
  status: 'completed',
  role,
  content: [{ type: role === 'user' ? 'input_text' : 'output_text', text: body }],
});

const callItem = (id: string, callId: string): Item => ({
  id,
  object: 'realtime.item',
  type: 'function_call',
  status: 'completed',
  call_id: callId,
  name: 'get_time',
  arguments: '{}',
});

const outputItem = (id: string, callId: string, output: string): Item => ({
  id,
  object: 'realtime.item',
  type: 'function_call_output',
  call_id: callId,
  output,
});

const toolCalls = (...ids: string[]): ChatMessage => ({
  role: 'assistant',
  content: null,
  tool_calls: ids.map((id) => ({
    id,
    type: 'function' as const,
    function: { name: 'get_time', arguments: '{}' },
  })),
});

/** A user turn: the user's message, then a reply of `reply` characters. */
function addTurn(h: History, n: number, reply = 40): void {
  const g = h.startGroup();
  h.addMessageItem(g, text(`u${n}`, 'user', `question ${n}`), {
    role: 'user',
    content: `question ${n}`,
  });
  h.addItems(
    g,
    [text(`a${n}`, 'assistant', 'x'.repeat(reply))],
    [{ role: 'assistant', content: 'x'.repeat(reply) }],
  );
}

/** A user turn whose reply calls a tool: user, assistant{tool_calls}, tool, assistant. */
function addToolTurn(h: History, n: number): void {
  const g = h.startGroup();
  h.addMessageItem(g, text(`u${n}`, 'user', `tool question ${n}`), {
    role: 'user',
    content: `tool question ${n}`,
  });
  h.addItems(
    g,
    [callItem(`c${n}`, `call_${n}`), outputItem(`o${n}`, `call_${n}`, '12:00')],
    [toolCalls(`call_${n}`), { role: 'tool', tool_call_id: `call_${n}`, content: '12:00' }],
  );
  h.addItems(
    g,
    [text(`a${n}`, 'assistant', 'It is noon.')],
    [{ role: 'assistant', content: 'It is noon.' }],
  );
}

/** Messages in short: text, `calls:ids` for tool calls, `tool:id` for results. */
const contents = (messages: ChatMessage[]) =>
  messages.map((m) => {
    if (m.role === 'tool') return `tool:${m.tool_call_id}`;
    if (m.role === 'assistant' && m.tool_calls) {
      return `calls:${m.tool_calls.map((c) => c.id).join(',')}`;
    }
    return m.content as string;
  });

describe('History.trim', () => {
  it('keeps everything when the history fits the budget', () => {
    const h = new History();
    for (let n = 1; n <= 3; n++) addTurn(h, n);
    const r = h.trim(10_000, 10);
    expect(r.droppedGroups).toBe(0);
    expect(r.messages).toHaveLength(6);
    expect(r.estimatedTokens).toBe(10 + r.messages.reduce((t, m) => t + estimateTokens(m), 0));
  });

  it('drops the oldest groups whole, and for good, until the rest fits', () => {
    const h = new History();
    for (let n = 1; n <= 4; n++) addTurn(h, n, 400);
    // Each turn is about 4 + 3 + 4 + 100 = 111 tokens; 250 holds two of them.
    const r = h.trim(250, 10);
    expect(r).toMatchObject({ droppedGroups: 2, droppedItems: 4 });
    expect(contents(r.messages)).toEqual([
      'question 3',
      'x'.repeat(400),
      'question 4',
      'x'.repeat(400),
    ]);
    expect(r.estimatedTokens).toBeLessThanOrEqual(250);
    expect(h.items.map((i) => i.id)).toEqual(['u3', 'a3', 'u4', 'a4']);
    expect(h.find('u1')).toBeUndefined();
    // Dropped messages are gone: they cannot be deleted again.
    expect(h.delete('u1')).toBe(false);
  });

  it('keeps the newest group even when it alone is over the budget', () => {
    const h = new History();
    addTurn(h, 1);
    addTurn(h, 2, 4000);
    const r = h.trim(300, 10);
    expect(r.droppedGroups).toBe(1);
    expect(contents(r.messages)[0]).toBe('question 2');
    expect(r.estimatedTokens).toBeGreaterThan(300);
  });

  it('never keeps a tool message without the assistant message that made the call', () => {
    const h = new History();
    addToolTurn(h, 1);
    addToolTurn(h, 2);
    addTurn(h, 3, 300);
    for (const budget of [400, 200, 120, 50]) {
      const { messages } = h.trim(budget, 10);
      messages.forEach((m, i) => {
        if (m.role !== 'tool') return;
        const before = messages.slice(0, i).reverse();
        const owner = before.find((b) => b.role !== 'tool');
        expect(owner).toMatchObject({ role: 'assistant' });
        expect(
          (owner as { tool_calls?: Array<{ id: string }> }).tool_calls?.map((c) => c.id),
        ).toContain(m.tool_call_id);
      });
      expect(messages.at(0)).toMatchObject({ role: 'user' });
    }
  });

  it('counts an image as many tokens, whatever the URL length', () => {
    const withImage = estimateTokens({
      role: 'user',
      content: [
        { type: 'text', text: 'What is it?' },
        { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } },
      ],
    });
    expect(withImage).toBeGreaterThan(700);
  });
});

describe('History.insertToolResults', () => {
  it('puts a result right after the assistant message that made the call and its other results', () => {
    const h = new History();
    const g = h.startGroup();
    h.addMessageItem(g, text('u1', 'user', 'time?'), { role: 'user', content: 'time?' });
    h.addItems(
      g,
      [callItem('c1', 'call_a'), callItem('c2', 'call_b'), outputItem('o1', 'call_a', 'A')],
      [toolCalls('call_a', 'call_b'), { role: 'tool', tool_call_id: 'call_a', content: 'A' }],
    );
    // The client added a message before sending its output.
    const next = h.startGroup();
    h.addMessageItem(next, text('u2', 'user', 'and?'), { role: 'user', content: 'and?' });

    const previous = h.insertToolResults('call_b', outputItem('o2', 'call_b', 'B'), [
      { role: 'tool', tool_call_id: 'call_b', content: 'B' },
    ]);

    expect(previous).toBe('o1');
    expect(h.items.map((i) => i.id)).toEqual(['u1', 'c1', 'c2', 'o1', 'o2', 'u2']);
    expect(contents(h.trim(10_000, 0).messages)).toEqual([
      'time?',
      'calls:call_a,call_b',
      'tool:call_a',
      'tool:call_b',
      'and?',
    ]);
  });

  it('puts a result after the owner message when messages carry no call ids (legacy functions)', () => {
    const h = new History();
    const g = h.startGroup();
    h.addMessageItem(g, text('u1', 'user', 'time?'), { role: 'user', content: 'time?' });
    const owner: ChatMessage = {
      role: 'assistant',
      content: null,
      function_call: { name: 'get_time', arguments: '{}' },
    };
    h.addItems(g, [callItem('c1', 'call_x')], [owner]);
    const next = h.startGroup();
    h.addMessageItem(next, text('u2', 'user', 'and?'), { role: 'user', content: 'and?' });

    const previous = h.insertToolResults(
      'call_x',
      outputItem('o1', 'call_x', 'noon'),
      [{ role: 'function', name: 'get_time', content: 'noon' }],
      owner,
    );
    expect(previous).toBe('c1');
    expect(h.trim(10_000, 0).messages.map((m) => m.role)).toEqual([
      'user',
      'assistant',
      'function',
      'user',
    ]);
  });

  it('appends results of a call it cannot find to the newest group', () => {
    const h = new History();
    addTurn(h, 1);
    const previous = h.insertToolResults('call_gone', outputItem('o1', 'call_gone', 'x'), [
      { role: 'user', content: 'TOOL_RESULT x' },
    ]);
    expect(previous).toBe('a1');
    expect(h.items.at(-1)?.id).toBe('o1');
  });
});

describe('History.delete and lastItemId', () => {
  it('deletes a message that stands for one chat message', () => {
    const h = new History();
    addTurn(h, 1);
    addTurn(h, 2);
    expect(h.delete('u1')).toBe(true);
    expect(h.find('u1')).toBeUndefined();
    expect(contents(h.trim(10_000, 0).messages)).not.toContain('question 1');
  });

  it('refuses to delete items of a response, which would part a call from its result', () => {
    const h = new History();
    addToolTurn(h, 1);
    expect(h.delete('c1')).toBe(false);
    expect(h.delete('o1')).toBe(false);
    expect(h.delete('a1')).toBe(false);
    expect(h.delete('nope')).toBe(false);
    expect(h.items).toHaveLength(4);
  });

  it("deletes a reply's message item: its words leave the model's message, its calls stay", () => {
    const h = new History();
    const g = h.startGroup();
    h.addMessageItem(g, text('u1', 'user', 'hi'), { role: 'user', content: 'hi' });
    // One round's words on both sides of its call, its result, then the last words.
    const round: ChatMessage = { ...toolCalls('call_1'), content: 'Let me see. Right.' };
    const last: ChatMessage = { role: 'assistant', content: 'It is noon.' };
    h.addItems(
      g,
      [
        text('w1', 'assistant', 'Let me see. '),
        callItem('c1', 'call_1'),
        text('w2', 'assistant', 'Right.'),
        outputItem('o1', 'call_1', '12:00'),
        text('w3', 'assistant', 'It is noon.'),
        text('f1', 'assistant', 'One moment…'),
      ],
      [round, { role: 'tool', tool_call_id: 'call_1', content: '12:00' }, last],
      new Map([
        ['w1', round],
        ['w2', round],
        ['w3', last],
        ['f1', null],
      ]),
    );
    expect(h.delete('w1')).toBe(false);
    expect(h.deleteReply('c1')).toBe(false);
    expect(h.deleteReply('o1')).toBe(false);
    expect(h.deleteReply('w1')).toBe(true);
    expect(round.content).toBe('Right.');
    expect(h.deleteReply('w3')).toBe(true);
    expect(h.deleteReply('f1')).toBe(true);
    // A restored history knows the rest, and deletes them the same way.
    const restored = History.fromState(JSON.parse(JSON.stringify(h.toState())) as HistoryState);
    expect(restored.deleteReply('w2')).toBe(true);
    expect(restored.items.map((i) => i.id)).toEqual(['u1', 'c1', 'o1']);
    expect(restored.trim(10_000, 0).messages).toEqual([
      { role: 'user', content: 'hi' },
      { ...toolCalls('call_1'), content: null },
      { role: 'tool', tool_call_id: 'call_1', content: '12:00' },
    ]);
    expect(restored.toState().replies).toBeUndefined();
  });

  it('removes a group left empty by a delete', () => {
    const h = new History();
    const g = h.startGroup();
    h.addMessageItem(g, text('u1', 'user', 'hi'), { role: 'user', content: 'hi' });
    expect(h.delete('u1')).toBe(true);
    expect(h.items).toEqual([]);
    expect(h.trim(100, 0).messages).toEqual([]);
  });

  it('names the newest item even when the newest group has none yet', () => {
    const h = new History();
    expect(h.lastItemId()).toBeNull();
    addTurn(h, 1);
    h.startGroup();
    expect(h.lastItemId()).toBe('a1');
  });

  it('clears everything and returns what was there', () => {
    const h = new History();
    addTurn(h, 1);
    expect(h.clear().map((i) => i.id)).toEqual(['u1', 'a1']);
    expect(h.items).toEqual([]);
    expect(h.lastItemId()).toBeNull();
  });
});

describe('History.toState and fromState', () => {
  it('round-trips through JSON, keeping which items stand for one message', () => {
    const h = new History();
    addTurn(h, 1);
    addToolTurn(h, 2);
    addTurn(h, 3);
    const state = JSON.parse(JSON.stringify(h.toState())) as ReturnType<History['toState']>;
    const back = History.fromState(state);
    expect(back.items).toEqual(h.items);
    expect(back.trim(1e9, 0).messages).toEqual(h.trim(1e9, 0).messages);
    expect(back.messageOf('u2')).toEqual({ role: 'user', content: 'tool question 2' });
    // The user message stands for one chat message: deletable; a response's item is not.
    expect(back.delete('a1')).toBe(false);
    expect(back.delete('u3')).toBe(true);
    expect(contents(back.trim(1e9, 0).messages)).toEqual([
      'question 1',
      'x'.repeat(40),
      'tool question 2',
      'calls:call_2',
      'tool:call_2',
      'It is noon.',
      'x'.repeat(40),
    ]);
  });

  it('keeps the places of single messages through every change History makes', () => {
    const h = new History();
    const g = h.startGroup();
    h.addMessageItem(g, text('u1', 'user', 'hi'), { role: 'user', content: 'hi' });
    h.addItems(g, [callItem('c1', 'call_1')], [toolCalls('call_1')]);
    const g2 = h.startGroup();
    h.addMessageItem(g2, text('u2', 'user', 'again'), { role: 'user', content: 'again' });
    h.addMessageItem(g2, text('u3', 'user', 'and again'), { role: 'user', content: 'and again' });
    expect(h.toState().singles).toEqual([
      { item: 'u1', group: 0, message: 0 },
      { item: 'u2', group: 1, message: 0 },
      { item: 'u3', group: 1, message: 1 },
    ]);
    // Taken out: those after it in its group move up.
    expect(h.delete('u2')).toBe(true);
    expect(h.toState().singles).toEqual([
      { item: 'u1', group: 0, message: 0 },
      { item: 'u3', group: 1, message: 0 },
    ]);
    h.addMessageItem(h.startGroup(), text('u4', 'user', 'last'), { role: 'user', content: 'last' });
    // The oldest group dropped: every group's number falls by one.
    h.trim(estimateTokens({ role: 'user', content: 'and again' }) * 2 + 1, 0);
    expect(h.toState().singles).toEqual([
      { item: 'u3', group: 0, message: 0 },
      { item: 'u4', group: 1, message: 0 },
    ]);
    expect(History.staleJson).toEqual([]);
  });

  it('weighs a message changed in place anew once touched', () => {
    const h = new History();
    const item = text('a1', 'assistant', 'x'.repeat(400)) as Extract<Item, { type: 'message' }>;
    const message: ChatMessage = { role: 'assistant', content: 'x'.repeat(400) };
    h.addItems(h.startGroup(), [item], [message]);
    expect(h.trim(1e9, 0).estimatedTokens).toBe(estimateTokens(message));
    // Cut to what was heard, as a truncate does.
    message.content = 'x'.repeat(40);
    h.touch('a1');
    expect(h.trim(1e9, 0).estimatedTokens).toBe(estimateTokens(message));
    // Changed without touch(): verifying notes it and weighs it fresh.
    message.content = 'x';
    expect(h.trim(1e9, 0).estimatedTokens).toBe(estimateTokens(message));
    expect(History.staleJson.splice(0)).toEqual([expect.stringContaining('without touch()')]);
  });

  it('keeps its token estimate summed through every change History makes', () => {
    const h = new History();
    const counted = () => h.trim(1e9, 0).messages.reduce((n, m) => n + estimateTokens(m), 0);
    // The running sum itself, not the fresh count the suite's check gives.
    const total = () => {
      History.verifyJson = false;
      try {
        return h.trim(1e9, 0).estimatedTokens;
      } finally {
        History.verifyJson = true;
      }
    };
    addTurn(h, 1);
    addToolTurn(h, 2);
    expect(total()).toBe(counted());
    h.insertToolResults('call_2', outputItem('o2b', 'call_2', 'late'), [
      { role: 'tool', tool_call_id: 'call_2', content: 'a late result' },
    ]);
    expect(total()).toBe(counted());
    const reply = h.find('a1') as Extract<Item, { type: 'message' }>;
    const message = h.trim(1e9, 0).messages[1]!;
    message.content = 'cut';
    reply.content = [{ type: 'output_text', text: 'cut' }];
    h.touch('a1');
    expect(total()).toBe(counted());
    expect(h.delete('u2')).toBe(true);
    expect(total()).toBe(counted());
    addTurn(h, 3, 400);
    expect(h.trim(150, 0).droppedGroups).toBeGreaterThan(0);
    expect(total()).toBe(counted());
    h.clear();
    expect(total()).toBe(0);
  });

  it('counts a message that leaves and joins again at its whole estimate', () => {
    const h = new History();
    addTurn(h, 1);
    const message = h.messageOf('u1')!;
    const item = h.find('u1')!;
    expect(h.delete('u1')).toBe(true);
    h.addMessageItem(h.startGroup(), item, message);
    History.verifyJson = false;
    try {
      const { messages, estimatedTokens } = h.trim(1e9, 0);
      expect(estimatedTokens).toBe(messages.reduce((n, m) => n + estimateTokens(m), 0));
    } finally {
      History.verifyJson = true;
    }
  });

  it('tells where a message is and finds it there again', () => {
    const h = new History();
    addTurn(h, 1);
    addToolTurn(h, 2);
    const message = h.messageOf('u2')!;
    const place = h.placeOf(message)!;
    expect(place).toEqual({ group: 1, message: 0 });
    const back = History.fromState(JSON.parse(JSON.stringify(h.toState())));
    expect(back.messageAt(place)).toEqual(message);
  });
});

describe('History.groupsJson', () => {
  const fresh = (h: History) => h.toState().groups.map((g) => JSON.stringify(g));

  it('follows every change History makes: items added, results inserted, deletes, trims', () => {
    const h = new History();
    const g = h.startGroup();
    h.addMessageItem(g, text('u1', 'user', 'hi'), { role: 'user', content: 'hi' });
    expect(h.groupsJson()).toEqual(fresh(h));
    h.addItems(g, [callItem('c1', 'call_1')], [toolCalls('call_1')]);
    expect(h.groupsJson()).toEqual(fresh(h));
    const g2 = h.startGroup();
    h.addMessageItem(g2, text('u2', 'user', 'again'), { role: 'user', content: 'again' });
    expect(h.groupsJson()).toEqual(fresh(h));
    // A result goes into the first group, after the call.
    h.insertToolResults('call_1', outputItem('o1', 'call_1', '12:00'), [
      { role: 'tool', tool_call_id: 'call_1', content: '12:00' },
    ]);
    expect(h.groupsJson()).toEqual(fresh(h));
    expect(h.groupsJson()[0]).toContain('12:00');
    expect(h.delete('u2')).toBe(true);
    expect(h.groupsJson()).toEqual(fresh(h));
    h.addItems(
      h.startGroup(),
      [text('a3', 'assistant', 'x'.repeat(400))],
      [{ role: 'assistant', content: 'x'.repeat(400) }],
    );
    h.trim(60, 0);
    expect(h.groupsJson()).toEqual(fresh(h));
    expect(h.groupsJson()).toHaveLength(1);
  });

  it('serialises a group changed in place again once touched', () => {
    const h = new History();
    const item = text('a1', 'assistant', 'a long reply') as Extract<Item, { type: 'message' }>;
    const message: ChatMessage = { role: 'assistant', content: 'a long reply' };
    h.addItems(h.startGroup(), [item], [message]);
    h.addMessageItem(h.startGroup(), text('u2', 'user', 'next'), { role: 'user', content: 'next' });
    const before = h.groupsJson();
    // Cut to what was heard, as a truncate does.
    item.content = [{ type: 'output_audio', transcript: 'a long' }];
    message.content = 'a long';
    History.verifyJson = false;
    try {
      expect(h.groupsJson()).toEqual(before);
    } finally {
      History.verifyJson = true;
    }
    h.touch('a1');
    const after = h.groupsJson();
    expect(after).toEqual(fresh(h));
    expect(after[0]).toContain('"transcript":"a long"');
    expect(after[1]).toBe(before[1]);
  });

  it('keeps the JSON a restored group was parsed from, until the group changes', () => {
    const h = new History();
    addTurn(h, 1);
    addToolTurn(h, 2);
    const stored = h.groupsJson();
    const state = JSON.parse(JSON.stringify(h.toState())) as ReturnType<History['toState']>;
    const restored = History.fromState({ ...state, groups: stored.map(parseGroup) });
    const stringify = vi.spyOn(JSON, 'stringify');
    History.verifyJson = false;
    try {
      // Its first save serialises no group again: the text it came from is its JSON.
      expect(restored.groupsJson()).toEqual(stored);
      expect(stringify).not.toHaveBeenCalled();
    } finally {
      History.verifyJson = true;
      stringify.mockRestore();
    }
    expect(restored.groupsJson()).toEqual(fresh(restored));
    addTurn(restored, 3);
    restored.addItems(
      restored.toState().groups[0]!,
      [text('a1b', 'assistant', 'and more')],
      [{ role: 'assistant', content: 'and more' }],
    );
    expect(restored.groupsJson()).toEqual(fresh(restored));
    expect(restored.groupsJson()[0]).toContain('and more');
    expect(restored.groupsJson()[1]).toBe(stored[1]);
    expect(History.staleJson).toEqual([]);
  });

  it('notes a stale group when verifying, and gives the fresh JSON', () => {
    const h = new History();
    const item = text('a1', 'assistant', 'said') as Extract<Item, { type: 'message' }>;
    h.addItems(h.startGroup(), [item], [{ role: 'assistant', content: 'said' }]);
    h.groupsJson();
    item.status = 'incomplete';
    expect(h.groupsJson()).toEqual(fresh(h));
    expect(History.staleJson.splice(0)).toEqual([expect.stringContaining('group 0 changed')]);
  });
});

describe('History.insertMessageItem', () => {
  const note = (id: string, body: string): [Item, ChatMessage] => [
    text(id, 'user', body),
    { role: 'user', content: body },
  ];

  it('puts a message first, after a message of its own, or after a response’s last item', () => {
    const h = new History();
    addTurn(h, 1);
    addToolTurn(h, 2);
    expect(h.insertMessageItem(null, ...note('r0', 'first'))).toBeUndefined();
    expect(h.insertMessageItem('u2', ...note('m2', 'after u2'))).toBeUndefined();
    expect(h.insertMessageItem('a2', ...note('e2', 'after a2'))).toBeUndefined();
    expect(h.items.map((i) => i.id)).toEqual([
      'r0',
      'u1',
      'a1',
      'u2',
      'm2',
      'c2',
      'o2',
      'a2',
      'e2',
    ]);
    const sent = contents(h.trim(1e9, 0).messages);
    expect(sent).toEqual([
      'first',
      'question 1',
      'x'.repeat(40),
      'tool question 2',
      'after u2',
      'calls:call_2',
      'tool:call_2',
      'It is noon.',
      'after a2',
    ]);
    // Each is a message of its own: it can be deleted, and the history survives a resume.
    const back = History.fromState(JSON.parse(JSON.stringify(h.toState())) as never);
    expect(contents(back.trim(1e9, 0).messages)).toEqual(sent);
    expect(back.messageOf('m2')).toEqual({ role: 'user', content: 'after u2' });
    expect(h.delete('r0')).toBe(true);
    expect(h.items[0]!.id).toBe('u1');
    expect(History.staleJson).toEqual([]);
  });

  it('never parts a tool call from its results, and names an item it does not have', () => {
    const h = new History();
    addToolTurn(h, 1);
    for (const inside of ['c1', 'o1']) {
      expect(h.insertMessageItem(inside, ...note('x', 'no'))).toContain('is inside a response');
    }
    expect(h.insertMessageItem('nope', ...note('x', 'no'))).toBe(
      'no item "nope" is in the conversation',
    );
    expect(h.find('x')).toBeUndefined();
    expect(h.items.map((i) => i.id)).toEqual(['u1', 'c1', 'o1', 'a1']);
  });
});
