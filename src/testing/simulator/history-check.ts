/**
 * Request validation as strict as vLLM's: a history the real server would
 * answer with 400 must fail here too, so bugs in how Troupe replays tool
 * calls show up in tests instead of in production (vLLM #47761 rejects
 * replayed arguments that are not valid JSON).
 */

const ROLES = new Set(['system', 'developer', 'user', 'assistant', 'tool', 'function']);
/** OpenAI's rule for function names. */
const FUNCTION_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/** vLLM's error body for a 400. */
export interface VllmErrorBody {
  object: 'error';
  message: string;
  type: 'BadRequestError';
  param: null;
  code: 400;
}

/** Builds vLLM's 400 body for a message. */
export function badRequestBody(message: string): VllmErrorBody {
  return { object: 'error', message, type: 'BadRequestError', param: null, code: 400 };
}

/**
 * Checks a chat-completions request body the way vLLM does.
 *
 * @returns `null` when the request is acceptable, else what is wrong (naming
 *   the message index).
 * @example checkChatRequest({ model: 'm', messages: [] }) // 'messages must be a non-empty array'
 */
export function checkChatRequest(body: unknown): string | null {
  if (!isRecord(body)) return 'the request body must be a JSON object';
  if (typeof body.model !== 'string') return 'model is required and must be a string';
  if (body.stream !== undefined && typeof body.stream !== 'boolean') {
    return 'stream must be a boolean';
  }
  if (body.stream_options !== undefined && body.stream_options !== null) {
    if (body.stream !== true) return 'Stream options can only be defined when `stream=True`.';
    if (!isRecord(body.stream_options)) return 'stream_options must be an object';
  }
  const messages = body.messages;
  if (!Array.isArray(messages) || messages.length === 0) {
    return 'messages must be a non-empty array';
  }
  return (
    checkMessages(messages) ??
    checkTools(body.tools) ??
    checkFunctions(body.functions) ??
    checkToolChoice(body.tool_choice, body.tools) ??
    checkFunctionChoice(body.function_call, body.functions)
  );
}

function checkMessages(messages: unknown[]): string | null {
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i];
    const at = `messages[${i}]`;
    if (!isRecord(m)) return `${at} must be an object`;
    if (typeof m.role !== 'string' || !ROLES.has(m.role)) {
      return `${at}.role must be one of ${[...ROLES].join(', ')} (got ${JSON.stringify(m.role)})`;
    }
    switch (m.role) {
      case 'system':
      case 'developer':
        if (!isTextContent(m.content)) return `${at}.content must be a string or text parts`;
        break;
      case 'user':
        if (!isUserContent(m.content)) {
          return `${at}.content must be a string or an array of text/image_url parts`;
        }
        break;
      case 'assistant': {
        const problem = checkAssistant(messages, i, m);
        if (problem !== null) return problem;
        break;
      }
      case 'tool': {
        if (typeof m.tool_call_id !== 'string' || m.tool_call_id === '') {
          return `${at}.tool_call_id must be a non-empty string`;
        }
        if (!isTextContent(m.content)) return `${at}.content must be a string or text parts`;
        if (!answersToolCall(messages, i, m.tool_call_id)) {
          return (
            `${at} is a tool message with tool_call_id ${JSON.stringify(m.tool_call_id)} ` +
            'that answers no tool call of the assistant message before it'
          );
        }
        break;
      }
      case 'function': {
        if (typeof m.name !== 'string' || m.name === '') {
          return `${at}.name must be a non-empty string`;
        }
        if (!isTextContent(m.content)) return `${at}.content must be a string`;
        const prev = previousConversational(messages, i);
        if (
          prev === null ||
          !isRecord(prev.message) ||
          prev.message.role !== 'assistant' ||
          !isRecord(prev.message.function_call) ||
          prev.message.function_call.name !== m.name
        ) {
          return `${at} is a function message for ${JSON.stringify(m.name)} that answers no function_call of the assistant message before it`;
        }
        break;
      }
    }
  }
  return null;
}

function checkAssistant(messages: unknown[], i: number, m: Record<string, unknown>): string | null {
  const at = `messages[${i}]`;
  const hasCalls = m.tool_calls !== undefined && m.tool_calls !== null;
  const hasFunctionCall = m.function_call !== undefined && m.function_call !== null;
  if (m.content !== undefined && m.content !== null && !isTextContent(m.content)) {
    return `${at}.content must be a string, text parts or null`;
  }
  if (!hasCalls && !hasFunctionCall && (m.content === undefined || m.content === null)) {
    return `${at} is an assistant message with neither content nor tool_calls`;
  }
  if (hasCalls) {
    if (!Array.isArray(m.tool_calls) || m.tool_calls.length === 0) {
      return `${at}.tool_calls must be a non-empty array`;
    }
    const ids: string[] = [];
    for (let k = 0; k < m.tool_calls.length; k++) {
      const call: unknown = m.tool_calls[k];
      const cat = `${at}.tool_calls[${k}]`;
      if (!isRecord(call)) return `${cat} must be an object`;
      if (typeof call.id !== 'string' || call.id === '')
        return `${cat}.id must be a non-empty string`;
      if (ids.includes(call.id)) return `${cat}.id ${JSON.stringify(call.id)} is used twice`;
      ids.push(call.id);
      if (call.type !== 'function') return `${cat}.type must be "function"`;
      const problem = checkFunctionCall(call.function, `${cat}.function`);
      if (problem !== null) return problem;
    }
    // The answers must follow at once: tool messages (system notes allowed in
    // between) before any other assistant, user or function message.
    const answered = new Map<string, number>();
    for (let j = i + 1; j < messages.length; j++) {
      const next = messages[j];
      if (!isRecord(next)) break;
      if (next.role === 'system' || next.role === 'developer') continue;
      if (next.role !== 'tool') break;
      const id = next.tool_call_id;
      // An unknown id is reported when the outer loop reaches messages[j].
      if (typeof id !== 'string' || !ids.includes(id)) continue;
      if (answered.has(id)) {
        return `messages[${j}] answers tool call ${JSON.stringify(id)} of ${at} a second time (first answered by messages[${answered.get(id)}])`;
      }
      answered.set(id, j);
    }
    for (let k = 0; k < ids.length; k++) {
      const id = ids[k] as string;
      if (!answered.has(id)) {
        return `${at}.tool_calls[${k}] (id ${JSON.stringify(id)}) has no tool message answering it right after ${at}`;
      }
    }
  }
  if (hasFunctionCall) {
    const problem = checkFunctionCall(m.function_call, `${at}.function_call`);
    if (problem !== null) return problem;
    const name = (m.function_call as { name: string }).name;
    const next = nextConversational(messages, i);
    if (
      next === null ||
      !isRecord(next.message) ||
      next.message.role !== 'function' ||
      next.message.name !== name
    ) {
      return `${at}.function_call (${JSON.stringify(name)}) is not followed by a function message with that name`;
    }
  }
  return null;
}

function checkFunctionCall(fn: unknown, at: string): string | null {
  if (!isRecord(fn)) return `${at} must be an object`;
  if (typeof fn.name !== 'string' || fn.name === '') return `${at}.name must be a non-empty string`;
  if (typeof fn.arguments !== 'string') return `${at}.arguments must be a string of JSON`;
  try {
    JSON.parse(fn.arguments);
  } catch {
    return `${at}.arguments is not valid JSON: ${JSON.stringify(truncate(fn.arguments, 80))}`;
  }
  return null;
}

/** Whether tool message i answers a call of the nearest assistant message before it. */
function answersToolCall(messages: unknown[], i: number, id: string): boolean {
  for (let j = i - 1; j >= 0; j--) {
    const prev = messages[j];
    if (!isRecord(prev)) return false;
    if (prev.role === 'tool' || prev.role === 'system' || prev.role === 'developer') continue;
    if (prev.role !== 'assistant' || !Array.isArray(prev.tool_calls)) return false;
    return prev.tool_calls.some((c: unknown) => isRecord(c) && c.id === id);
  }
  return false;
}

function previousConversational(
  messages: unknown[],
  i: number,
): { message: unknown; index: number } | null {
  for (let j = i - 1; j >= 0; j--) {
    const m = messages[j];
    if (isRecord(m) && (m.role === 'system' || m.role === 'developer')) continue;
    return { message: m, index: j };
  }
  return null;
}

function nextConversational(
  messages: unknown[],
  i: number,
): { message: unknown; index: number } | null {
  for (let j = i + 1; j < messages.length; j++) {
    const m = messages[j];
    if (isRecord(m) && (m.role === 'system' || m.role === 'developer')) continue;
    return { message: m, index: j };
  }
  return null;
}

function checkTools(tools: unknown): string | null {
  if (tools === undefined || tools === null) return null;
  if (!Array.isArray(tools)) return 'tools must be an array';
  const names = new Set<string>();
  for (let k = 0; k < tools.length; k++) {
    const tool: unknown = tools[k];
    const at = `tools[${k}]`;
    if (!isRecord(tool)) return `${at} must be an object`;
    if (tool.type !== 'function') return `${at}.type must be "function"`;
    const problem = checkFunctionDefinition(tool.function, `${at}.function`);
    if (problem !== null) return problem;
    const name = (tool.function as { name: string }).name;
    if (names.has(name)) return `${at}.function.name ${JSON.stringify(name)} is declared twice`;
    names.add(name);
  }
  return null;
}

function checkFunctions(functions: unknown): string | null {
  if (functions === undefined || functions === null) return null;
  if (!Array.isArray(functions)) return 'functions must be an array';
  for (let k = 0; k < functions.length; k++) {
    const problem = checkFunctionDefinition(functions[k], `functions[${k}]`);
    if (problem !== null) return problem;
  }
  return null;
}

function checkFunctionDefinition(fn: unknown, at: string): string | null {
  if (!isRecord(fn)) return `${at} must be an object`;
  if (typeof fn.name !== 'string' || !FUNCTION_NAME.test(fn.name)) {
    return `${at}.name must match ${FUNCTION_NAME.source} (got ${JSON.stringify(fn.name)})`;
  }
  if (fn.description !== undefined && typeof fn.description !== 'string') {
    return `${at}.description must be a string`;
  }
  if (fn.parameters !== undefined && !isRecord(fn.parameters)) {
    return `${at}.parameters must be a JSON Schema object`;
  }
  return null;
}

function toolNames(tools: unknown): string[] {
  if (!Array.isArray(tools)) return [];
  return tools.flatMap((t: unknown) =>
    isRecord(t) && isRecord(t.function) && typeof t.function.name === 'string'
      ? [t.function.name]
      : [],
  );
}

function checkToolChoice(choice: unknown, tools: unknown): string | null {
  if (choice === undefined || choice === null) return null;
  const hasTools = Array.isArray(tools) && tools.length > 0;
  if (typeof choice === 'string') {
    if (choice === 'none' || choice === 'auto') return null;
    if (choice === 'required') {
      return hasTools ? null : 'When using `tool_choice`, `tools` must be set.';
    }
    return `tool_choice must be "none", "auto", "required" or a named function (got ${JSON.stringify(choice)})`;
  }
  if (
    !isRecord(choice) ||
    choice.type !== 'function' ||
    !isRecord(choice.function) ||
    typeof choice.function.name !== 'string'
  ) {
    return 'tool_choice must be "none", "auto", "required" or {"type":"function","function":{"name":...}}';
  }
  if (!hasTools) return 'When using `tool_choice`, `tools` must be set.';
  const name = choice.function.name;
  if (!toolNames(tools).includes(name)) {
    return `Tool '${name}' has not been passed in \`tools\`.`;
  }
  return null;
}

function checkFunctionChoice(choice: unknown, functions: unknown): string | null {
  if (choice === undefined || choice === null) return null;
  if (choice === 'none' || choice === 'auto') return null;
  if (isRecord(choice) && typeof choice.name === 'string') {
    const names = Array.isArray(functions)
      ? functions.flatMap((f: unknown) =>
          isRecord(f) && typeof f.name === 'string' ? [f.name] : [],
        )
      : [];
    if (names.includes(choice.name)) return null;
    return `function_call names ${JSON.stringify(choice.name)}, which is not in \`functions\``;
  }
  return 'function_call must be "none", "auto" or {"name": ...}';
}

function isTextContent(content: unknown): boolean {
  if (typeof content === 'string') return true;
  return (
    Array.isArray(content) &&
    content.every((p: unknown) => isRecord(p) && p.type === 'text' && typeof p.text === 'string')
  );
}

function isUserContent(content: unknown): boolean {
  if (typeof content === 'string') return true;
  return (
    Array.isArray(content) &&
    content.length > 0 &&
    content.every(
      (p: unknown) =>
        isRecord(p) &&
        ((p.type === 'text' && typeof p.text === 'string') ||
          (p.type === 'image_url' && isRecord(p.image_url) && typeof p.image_url.url === 'string')),
    )
  );
}

function truncate(s: string, max: number): string {
  return s.length <= max ? s : `${s.slice(0, max)}…`;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
