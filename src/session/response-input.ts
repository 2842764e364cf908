/**
 * A response's own input (GA `response.input`) and the calls a client adds
 * itself: items — given whole or as `item_reference`s to the conversation's —
 * turned into the messages the model reads, always valid to send (every call
 * answered right after it).
 */
import type { CharacterTurnSettings } from '../characters/conversation.js';
import { ProtocolError } from '../errors.js';
import type { ChatMessage } from '../llm/chunk.js';
import { TOOL_CALL_MARKER } from '../llm/prompt-tools.js';
import { assistantMessage, toolResultMessages } from '../llm/turn-runner.js';
import type { ToolCall } from '../tools/types.js';
import type { ClientFunctionCallItem, InputItem, Item } from './events.js';
import { checkMessage, duplicateCallId, type ItemPlace } from './item-checks.js';
import { spokenAsText, toChatMessage } from './items.js';

/** The output a call gets when the client gave none: the model must see every call answered. */
export const MISSING_OUTPUT = 'Error: the client sent no output for this call.';

/**
 * The assistant message that makes client-recorded calls, in the
 * character's tool format (prompt mode: its `TOOL_CALL:` lines).
 */
export function callMessage(calls: readonly ToolCall[], turn: CharacterTurnSettings): ChatMessage {
  const mode = turn.toolMode ?? 'native';
  if (mode === 'prompt') {
    const lines = calls.map(
      (c) =>
        `${TOOL_CALL_MARKER} ${JSON.stringify({ tool_name: c.name, parameters: parseObject(c.arguments) })}`,
    );
    return { role: 'assistant', content: lines.join('\n') };
  }
  return assistantMessage(calls, '', mode, turn.toolFormat === 'functions');
}

/** A call's output as the model reads it, in the character's tool format. */
export function outputMessages(
  call: ToolCall,
  output: string,
  turn: CharacterTurnSettings,
): ChatMessage[] {
  return toolResultMessages(
    [{ callId: call.id, name: call.name, outcome: 'ok', output }],
    turn.toolMode ?? 'native',
    turn.toolFormat === 'functions',
  );
}

/**
 * `response.input` as messages. Item references are looked up in the
 * conversation; consecutive calls share one assistant message (native tool
 * format); a call without an output in the input gets {@link MISSING_OUTPUT};
 * an output without its call is refused. Items given whole are checked as
 * `conversation.item.create` checks them; `checkCall` checks a call's tool.
 */
export function inputMessages(
  input: readonly InputItem[],
  find: (id: string) => Item | undefined,
  turn: CharacterTurnSettings,
  eventId: string | null,
  checkCall: (item: ClientFunctionCallItem, place: ItemPlace) => ProtocolError | undefined,
): ChatMessage[] | ProtocolError {
  const out: ChatMessage[] = [];
  const callIds = new Set<string>();
  const native = (turn.toolMode ?? 'native') === 'native' && turn.toolFormat !== 'functions';
  /** The latest calls, the place of their message, and which have outputs. */
  let open: { calls: ToolCall[]; at: number; answered: Set<string> } | undefined;
  const settle = () => {
    for (const c of open?.calls ?? []) {
      if (!open!.answered.has(c.id)) out.push(...outputMessages(c, MISSING_OUTPUT, turn));
    }
    open = undefined;
  };
  for (const [i, given] of input.entries()) {
    const place: ItemPlace = { event: 'response.create', at: `response.input[${i}]`, eventId };
    let item: Item | InputItem = given;
    if (given.type === 'item_reference') {
      const found = find(given.id);
      if (!found) {
        return new ProtocolError(
          'item_not_found',
          `response.create: response.input[${i}].id: no item "${given.id}" in the conversation; reference items the conversation holds, or give the item whole.`,
          { param: `response.input[${i}].id`, eventId },
        );
      }
      item = found;
    } else {
      const problem =
        given.type === 'message'
          ? checkMessage(given, place)
          : given.type === 'function_call'
            ? checkCall(given, place)
            : undefined;
      if (problem) return problem;
    }
    if (item.type === 'function_call' && item.call_id !== undefined) {
      if (callIds.has(item.call_id)) return duplicateCallId(item.call_id, 'response.input', place);
      callIds.add(item.call_id);
    }
    switch (item.type) {
      case 'message':
        settle();
        out.push(toChatMessage(item.role, spokenAsText(item.content)));
        break;
      case 'function_call': {
        const call = {
          id: item.call_id ?? `call_input_${i}`,
          name: item.name,
          arguments: item.arguments,
        };
        if (native && open && open.answered.size === 0) {
          open.calls.push(call);
          out[open.at] = callMessage(open.calls, turn);
          break;
        }
        settle();
        open = { calls: [call], at: out.length, answered: new Set() };
        out.push(callMessage([call], turn));
        break;
      }
      case 'function_call_output': {
        const call = open?.calls.find((c) => c.id === item.call_id);
        if (!call || open!.answered.has(call.id)) {
          return new ProtocolError(
            'invalid_value',
            `response.create: response.input[${i}].call_id: no function_call "${item.call_id}" right before this output in response.input; put the call item (or its item_reference) before its output.`,
            { param: `response.input[${i}].call_id`, eventId },
          );
        }
        open!.answered.add(call.id);
        out.push(...outputMessages(call, item.output, turn));
        break;
      }
      case 'mcp_call': {
        // A call the server ran: the model reads it as a call and its result.
        settle();
        const call = { id: item.id, name: item.name, arguments: item.arguments };
        const output = item.output ?? `Error: ${item.error?.message ?? 'the tool gave no result.'}`;
        out.push(callMessage([call], turn), ...outputMessages(call, output, turn));
        break;
      }
    }
  }
  settle();
  return out;
}

function parseObject(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return {};
  }
}
