/**
 * Troupe's web client, text mode: pick a character, chat, watch the reply
 * stream in and the character's tool calls run.
 *
 * Plain ES module, no build step and nothing fetched from elsewhere: the
 * server serves this folder as static files. The wire protocol is the OpenAI
 * Realtime API's (GA names) plus `troupe.*` events; see docs/PROTOCOL.md.
 *
 * Layout of this file: constants · elements · state · DOM helpers ·
 * characters · connection · server events · transcript · tool cards ·
 * composer · voice (a slot for later) · start.
 */

// ---------------------------------------------------------------- constants

/** Where the character list comes from. */
const CHARACTERS_PATH = '/v1/characters';
/** The realtime WebSocket endpoint. */
const REALTIME_PATH = '/v1/realtime';
/** Older errors are dropped beyond this many, so the list never pushes the chat away. */
const MAX_ERRORS_SHOWN = 4;
/** Within this many pixels of the bottom, new output keeps the transcript scrolled down. */
const STICK_TO_BOTTOM_PX = 48;
/** Close code the client uses when it leaves on purpose (switching character). */
const CLOSE_NORMAL = 1000;

/** What the standard close codes mean, for people reading the banner. */
const CLOSE_MEANINGS = {
  1000: 'normal closure',
  1001: 'server going away',
  1006: 'connection lost',
  1008: 'refused by policy (check the token)',
  1009: 'message too large',
  1011: 'server error',
  1013: 'server busy, try again later',
};

// ---------------------------------------------------------------- elements

/** The element with this id; a missing one is a bug in index.html, so say which. */
function byId(id) {
  const element = document.getElementById(id);
  if (!element) throw new Error(`index.html has no element with id "${id}"`);
  return element;
}

const ui = {
  select: byId('character'),
  status: byId('status'),
  description: byId('character-description'),
  tools: byId('character-tools'),
  banner: byId('connection-banner'),
  closeInfo: byId('close-info'),
  reconnect: byId('reconnect'),
  errors: byId('errors'),
  transcript: byId('transcript'),
  composer: byId('composer'),
  input: byId('message'),
  send: byId('send'),
  stop: byId('stop'),
};

// ---------------------------------------------------------------- state

/** The page's query string: `?token=` (auth) and `?character=` (the initial pick). */
const pageParams = new URLSearchParams(location.search);
const token = pageParams.get('token');

const state = {
  /** From GET /v1/characters. */
  characters: [],
  /** The character the current (or last) socket was opened for. */
  characterId: '',
  /** Display name of the session's character, once known. */
  characterName: '',
  /** The live socket; events from any other (older) socket are ignored. */
  socket: null,
  /**
   * The turn: `idle` (may send), `requested` (response.create sent, no
   * response.created yet) or `active` (a response is running).
   */
  turn: 'idle',
  /** Per connection: item id → the latest bubble showing that item's text. */
  bubbles: new Map(),
  /** Per connection: item id → how many bubbles show it (more than one after a tool card). */
  bubbleCounts: new Map(),
  /** Per connection: call id → tool card. */
  cards: new Map(),
  /** Per connection: function_call item id → call id (argument deltas may carry either). */
  callIdsByItem: new Map(),
  /** User bubbles shown locally, waiting for the server's echo of their item. */
  pendingUserBubbles: [],
};

// ---------------------------------------------------------------- DOM helpers

/**
 * Creates an element. `attrs` become attributes, except `text` (textContent)
 * and `className`; children are nodes or strings.
 */
function h(tag, attrs = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === 'text') element.textContent = String(value);
    else if (name === 'className') element.className = String(value);
    else element.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children) {
    if (child !== undefined && child !== null) element.append(child);
  }
  return element;
}

/** Whether the transcript is scrolled (nearly) to the bottom. */
function isNearBottom() {
  const t = ui.transcript;
  return t.scrollHeight - t.scrollTop - t.clientHeight < STICK_TO_BOTTOM_PX;
}

/**
 * Following the end of the transcript: on until the reader scrolls up, on
 * again when they scroll back down. Decided from scroll events rather than
 * at each update, because the transcript also moves away from the bottom
 * when it gets shorter (an error appears above it) or when a large card is
 * added between two frames; neither means the reader looked away.
 */
const follow = { on: true, lastAutoTop: 0, scheduled: false };

ui.transcript.addEventListener('scroll', () => {
  const t = ui.transcript;
  if (isNearBottom()) follow.on = true;
  // Only a move up from where we last scrolled it is the reader's doing.
  else if (t.scrollTop < follow.lastAutoTop - 1) follow.on = false;
});

/** Scrolls to the end at the next frame if following; one scroll per frame at most. */
function keepAtBottom() {
  if (!follow.on || follow.scheduled) return;
  follow.scheduled = true;
  requestAnimationFrame(() => {
    follow.scheduled = false;
    if (!follow.on) return;
    const t = ui.transcript;
    t.scrollTop = t.scrollHeight;
    follow.lastAutoTop = t.scrollTop;
  });
}

/** Runs `change` on the transcript, then keeps the end in view if the reader is following it. */
function updateTranscript(change) {
  const result = change();
  keepAtBottom();
  return result;
}

/** Milliseconds for people: one decimal below 10 ms (tools are often sub-millisecond). */
function formatMs(ms) {
  return `${ms < 10 ? Number(ms.toFixed(1)) : Math.round(ms)} ms`;
}

/** Pretty JSON when `value` is JSON (or a JSON string), else the text as it is. */
function formatJson(value) {
  if (typeof value === 'string') {
    try {
      return JSON.stringify(JSON.parse(value), null, 2);
    } catch {
      return value;
    }
  }
  if (value === undefined) return '';
  return JSON.stringify(value, null, 2);
}

/** The text of an item's content parts (text for typed input, transcript for speech). */
function itemText(item) {
  if (!Array.isArray(item?.content)) return '';
  return item.content
    .map((part) => (typeof part?.text === 'string' ? part.text : (part?.transcript ?? '')))
    .join('');
}

// ---------------------------------------------------------------- status and errors

/** Shows the connection state: `connecting`, `open`, `closed` or `error`. */
function setStatus(kind, text) {
  ui.status.dataset.state = kind;
  ui.status.textContent = text;
}

/**
 * Shows an error in the error area: a server `error` event's `error` object,
 * or `{code, message}` for failures on this side.
 */
function showError({ type, code, message, param }) {
  const label = code || type || 'error';
  const details = param ? ` (param: ${param})` : '';
  const dismiss = h('button', {
    type: 'button',
    className: 'dismiss',
    'aria-label': 'Dismiss error',
    text: '×',
  });
  const entry = h(
    'div',
    { className: 'error', 'data-testid': 'error', 'data-code': label },
    h('strong', { className: 'error-code', text: label }),
    h('span', { className: 'error-message', text: `${message ?? 'Unknown error'}${details}` }),
    dismiss,
  );
  dismiss.addEventListener('click', () => entry.remove());
  ui.errors.append(entry);
  while (ui.errors.children.length > MAX_ERRORS_SHOWN) ui.errors.firstElementChild?.remove();
  keepAtBottom();
}

function clearErrors() {
  ui.errors.replaceChildren();
}

// ---------------------------------------------------------------- characters

/** Loads the character list into the picker and connects to the first pick. */
async function loadCharacters() {
  setStatus('connecting', 'Loading characters…');
  let list;
  try {
    const response = await fetch(CHARACTERS_PATH, { headers: { accept: 'application/json' } });
    if (!response.ok) throw new Error(`HTTP ${response.status} ${response.statusText}`);
    const body = await response.json();
    list = Array.isArray(body?.characters) ? body.characters : [];
  } catch (error) {
    setStatus('error', 'Could not load characters');
    showError({
      code: 'characters_unavailable',
      message: `Could not load ${CHARACTERS_PATH}: ${error instanceof Error ? error.message : error}. Reload the page to try again.`,
    });
    return;
  }
  state.characters = list.filter((c) => typeof c?.id === 'string');
  if (state.characters.length === 0) {
    ui.select.replaceChildren(h('option', { value: '', text: 'No characters' }));
    setStatus('error', 'No characters available');
    showError({
      code: 'no_characters',
      message: 'The server has no characters loaded; add one to its characters directory.',
    });
    return;
  }
  ui.select.replaceChildren(
    ...state.characters.map((c) => h('option', { value: c.id, text: c.name || c.id })),
  );
  ui.select.disabled = false;
  const wanted = pageParams.get('character');
  const first = state.characters.some((c) => c.id === wanted) ? wanted : state.characters[0].id;
  ui.select.value = first;
  connect(first);
}

/** Shows the picked character's description and tool names. */
function showCharacterInfo(id) {
  const character = state.characters.find((c) => c.id === id);
  ui.description.textContent = character?.description ?? '';
  const tools = Array.isArray(character?.tools) ? character.tools : [];
  const names = tools.map((t) => (typeof t === 'string' ? t : (t?.name ?? ''))).filter(Boolean);
  ui.tools.hidden = names.length === 0;
  ui.tools.replaceChildren(
    h('span', { className: 'tool-names-label', text: 'Tools: ' }),
    ...names.flatMap((name, i) => [i > 0 ? ', ' : '', h('code', { text: name })]),
  );
}

/** Puts the character in the page URL, so a reload comes back to it (the token stays). */
function rememberCharacter(id) {
  const url = new URL(location.href);
  url.searchParams.set('character', id);
  history.replaceState(null, '', url);
}

// ---------------------------------------------------------------- connection

/** The realtime URL for a character, with the page's token when it has one. */
function realtimeUrl(characterId) {
  const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
  const query = `character=${encodeURIComponent(characterId)}`;
  const auth = token ? `&token=${encodeURIComponent(token)}` : '';
  return `${scheme}://${location.host}${REALTIME_PATH}?${query}${auth}`;
}

/**
 * Opens a fresh session with a character. Any open socket is closed first:
 * a session belongs to one character, so switching starts a new one.
 */
function connect(characterId) {
  const previous = state.socket;
  // Forget the old socket before closing it, so its close event is ignored
  // rather than reported as a lost connection.
  state.socket = null;
  if (previous && previous.readyState <= WebSocket.OPEN) {
    previous.close(CLOSE_NORMAL, 'switching character');
  }

  state.characterId = characterId;
  state.characterName = state.characters.find((c) => c.id === characterId)?.name ?? characterId;
  resetConversation();
  showCharacterInfo(characterId);
  rememberCharacter(characterId);
  ui.banner.hidden = true;
  setStatus('connecting', `Connecting to ${state.characterName}…`);

  const socket = new WebSocket(realtimeUrl(characterId));
  state.socket = socket;

  socket.addEventListener('open', () => {
    if (socket !== state.socket) return;
    setStatus('open', `Connected to ${state.characterName}`);
    updateControls();
    ui.input.focus();
  });
  socket.addEventListener('message', (message) => {
    if (socket !== state.socket) return;
    let event;
    try {
      event = JSON.parse(message.data);
    } catch {
      showError({
        code: 'bad_server_message',
        message: 'The server sent a frame that is not JSON.',
      });
      return;
    }
    handleServerEvent(event);
  });
  socket.addEventListener('close', (close) => {
    if (socket !== state.socket) return;
    state.socket = null;
    onDisconnected(close.code, close.reason);
  });
  // A failed connection fires `error` and then `close`; the close handler reports it.
}

/** Shows why the socket closed and offers to reconnect. */
function onDisconnected(code, reason) {
  endTurn();
  const meaning = CLOSE_MEANINGS[code] ?? 'closed';
  setStatus('closed', `Disconnected (${code})`);
  ui.closeInfo.textContent = `Connection closed (code ${code}: ${meaning})${reason ? ` — ${reason}` : ''}.`;
  ui.closeInfo.dataset.code = String(code);
  ui.banner.hidden = false;
  updateControls();
}

/** Sends one client event; returns whether the socket was open. */
function sendEvent(event) {
  const socket = state.socket;
  if (!socket || socket.readyState !== WebSocket.OPEN) return false;
  socket.send(JSON.stringify(event));
  return true;
}

function isOpen() {
  return state.socket?.readyState === WebSocket.OPEN;
}

// ---------------------------------------------------------------- server events

/** Dispatches one server event. Unknown types are ignored: the protocol may grow. */
function handleServerEvent(event) {
  switch (event?.type) {
    case 'session.created':
    case 'session.updated':
      onSession(event.session);
      break;
    case 'conversation.item.added':
    case 'conversation.item.done':
      onConversationItem(event.item, event.type === 'conversation.item.done');
      break;
    case 'response.created':
      setTurn('active');
      break;
    // Speech replies (a later change) carry their text as an audio transcript.
    case 'response.output_text.delta':
    case 'response.output_audio_transcript.delta':
      appendAssistantText(event.item_id ?? `response:${event.response_id}`, event.delta ?? '');
      break;
    case 'response.output_text.done':
    case 'response.output_audio_transcript.done':
      finishAssistantText(
        event.item_id ?? `response:${event.response_id}`,
        event.text ?? event.transcript,
      );
      break;
    case 'response.output_item.added':
    case 'response.output_item.done':
      if (event.item?.type === 'function_call') onFunctionCallItem(event.item);
      break;
    case 'response.function_call_arguments.delta':
      appendToolArguments(event.call_id, event.item_id, event.delta ?? '');
      break;
    case 'response.function_call_arguments.done':
      setToolArguments(event.call_id, event.item_id, event.arguments, event.name);
      break;
    case 'troupe.tool_call.result':
      onToolResult(event);
      break;
    case 'response.done':
      onResponseDone(event.response);
      break;
    case 'error':
      onServerError(event.error);
      break;
    default:
      break;
  }
}

function onSession(session) {
  const character = session?.character;
  const id = typeof character === 'string' ? character : character?.id;
  const known = state.characters.find((c) => c.id === id);
  const name =
    (typeof character === 'object' && character?.name) || known?.name || id || state.characterName;
  state.characterName = name;
  // The server may have chosen (a default) or normalised the character: follow it.
  if (known && id !== state.characterId) {
    state.characterId = id;
    ui.select.value = id;
    showCharacterInfo(id);
  }
  if (isOpen()) setStatus('open', `Connected to ${name}`);
}

function onConversationItem(item, done) {
  if (item?.type !== 'message') return; // function_call items show as tool cards instead
  if (item.role === 'user') onUserItem(item);
  else if (item.role === 'assistant') onAssistantItem(item, done);
}

function onServerError(error) {
  showError(error ?? { message: 'The server reported an error without details.' });
  // The server refused our response.create before starting a response (no
  // response.created came): let the user try again. A running response ends
  // with response.done instead.
  if (state.turn === 'requested') setTurn('idle');
}

function onResponseDone(response) {
  const status = response?.status ?? 'completed';
  // Calls that never got a result (cancelled mid-way, or client-side tools) stop spinning.
  for (const card of state.cards.values()) {
    if (card.dataset.outcome === 'pending') setCardOutcome(card, 'none', 'no result');
  }
  updateTranscript(() => ui.transcript.append(turnFooter(status, response?.troupe, response)));
  endTurn();
}

/** A small line under a turn: its status when not completed, first-token time, tool rounds. */
function turnFooter(status, troupe, response) {
  const parts = [];
  if (status !== 'completed') {
    const why = response?.status_details?.reason ?? response?.status_details?.error?.message;
    parts.push(`Response ${status}${why ? `: ${why}` : ''}`);
  }
  if (typeof troupe?.ttft_ms === 'number') parts.push(`first token ${formatMs(troupe.ttft_ms)}`);
  if (typeof troupe?.tool_rounds === 'number' && troupe.tool_rounds > 0) {
    parts.push(`${troupe.tool_rounds} tool round${troupe.tool_rounds === 1 ? '' : 's'}`);
  }
  return h('p', {
    className: 'turn-meta',
    'data-testid': 'turn-meta',
    'data-status': status,
    text: parts.join(' · '),
  });
}

// ---------------------------------------------------------------- turn

/** Moves the turn to `idle`, `requested` or `active` and updates the buttons. */
function setTurn(turn) {
  state.turn = turn;
  // While a reply streams, screen readers wait for it to finish instead of
  // reading every fragment.
  ui.transcript.setAttribute('aria-busy', turn === 'active' ? 'true' : 'false');
  updateControls();
}

function endTurn() {
  for (const bubble of ui.transcript.querySelectorAll('.message[aria-busy="true"]')) {
    bubble.setAttribute('aria-busy', 'false');
  }
  setTurn('idle');
}

/** Send needs an open socket and no running response; Stop needs a running one. */
function updateControls() {
  const open = isOpen();
  const running = state.turn !== 'idle';
  ui.input.disabled = !open;
  ui.send.disabled = !open || running;
  ui.stop.disabled = !open || !running;
  ui.composer.dataset.turn = state.turn;
}

// ---------------------------------------------------------------- transcript

/** Empties the transcript and the per-connection lookups (a new session starts clean). */
function resetConversation() {
  ui.transcript.replaceChildren();
  state.bubbles.clear();
  state.bubbleCounts.clear();
  state.cards.clear();
  state.callIdsByItem.clear();
  state.pendingUserBubbles = [];
  follow.on = true;
  follow.lastAutoTop = 0;
  state.turn = 'idle';
  ui.transcript.setAttribute('aria-busy', 'false');
  updateControls();
}

/** A message bubble; `itemId` is absent for a user message not yet echoed. */
function createBubble(role, text, itemId) {
  const who = role === 'user' ? 'You' : state.characterName || 'Character';
  const bubble = h(
    'article',
    {
      className: `message ${role}`,
      'data-testid': 'message',
      'data-role': role,
      'data-item-id': itemId,
      'aria-label': `${who} said`,
    },
    h('p', { className: 'message-author', text: who, 'aria-hidden': 'true' }),
    h('div', { className: 'message-text', 'data-testid': 'message-text', text }),
  );
  updateTranscript(() => ui.transcript.append(bubble));
  return bubble;
}

function bubbleText(bubble) {
  return bubble.querySelector('.message-text');
}

/** Records that `bubble` shows (part of) item `itemId`. */
function trackBubble(itemId, bubble) {
  state.bubbles.set(itemId, bubble);
  state.bubbleCounts.set(itemId, (state.bubbleCounts.get(itemId) ?? 0) + 1);
}

/** The user's own message, shown at once; the server's echo is matched to it later. */
function addLocalUserBubble(text) {
  const bubble = createBubble('user', text);
  bubble.dataset.pending = 'true';
  state.pendingUserBubbles.push(bubble);
}

/**
 * The server's echo of a user item. It is matched to the bubble shown when
 * the message was sent, so every message appears exactly once; an item with
 * no local bubble (sent by another means) gets its own.
 */
function onUserItem(item) {
  if (state.bubbles.has(item.id)) return;
  const text = itemText(item);
  const index = state.pendingUserBubbles.findIndex((b) => bubbleText(b).textContent === text);
  if (index >= 0) {
    const [bubble] = state.pendingUserBubbles.splice(index, 1);
    bubble.dataset.itemId = item.id;
    delete bubble.dataset.pending;
    trackBubble(item.id, bubble);
    return;
  }
  if (text) trackBubble(item.id, createBubble('user', text, item.id));
}

/**
 * An assistant message entering history: the greeting (no response around
 * it), or a streamed reply whose bubble the deltas already made.
 */
function onAssistantItem(item, done) {
  const text = itemText(item);
  const existing = state.bubbles.get(item.id);
  if (!existing) {
    // Empty when a reply's item is announced before its text streams in; the
    // deltas will make the bubble.
    if (text) trackBubble(item.id, createBubble('assistant', text, item.id));
    return;
  }
  // The finished item is authoritative, unless the text is split across
  // bubbles around a tool card (then the bubbles already hold it all).
  if (done && text && state.bubbleCounts.get(item.id) === 1) {
    bubbleText(existing).textContent = text;
  }
}

/**
 * Appends streamed text to the bubble of its item. Text after a tool card
 * goes into a new bubble below the card, so the transcript reads in order.
 */
function appendAssistantText(itemId, delta) {
  if (!delta) return;
  let bubble = state.bubbles.get(itemId);
  if (!bubble || bubble.nextElementSibling !== null) {
    bubble = createBubble('assistant', '', itemId);
    trackBubble(itemId, bubble);
  }
  bubble.setAttribute('aria-busy', 'true');
  updateTranscript(() => bubbleText(bubble).append(delta));
}

function finishAssistantText(itemId, text) {
  const bubble = state.bubbles.get(itemId);
  if (!bubble) {
    if (text) trackBubble(itemId, createBubble('assistant', text, itemId));
    return;
  }
  if (typeof text === 'string' && text && state.bubbleCounts.get(itemId) === 1) {
    bubbleText(bubble).textContent = text;
  }
  bubble.setAttribute('aria-busy', 'false');
}

// ---------------------------------------------------------------- tool cards

/** The card for a call, found by call id or by its function_call item id. */
function findCard(callId, itemId) {
  return (
    (callId && state.cards.get(callId)) ||
    (itemId && state.cards.get(state.callIdsByItem.get(itemId) ?? '')) ||
    undefined
  );
}

/** A card for one tool call: name, arguments, then outcome, output and duration. */
function createCard(callId, name) {
  const card = h(
    'article',
    {
      className: 'tool-card',
      'data-testid': 'tool-card',
      'data-call-id': callId,
      'data-name': name,
      'data-outcome': 'pending',
      'aria-label': `Tool call ${name}`,
    },
    h(
      'header',
      { className: 'tool-header' },
      h('span', { className: 'tool-kind', text: 'Tool', 'aria-hidden': 'true' }),
      h('code', { className: 'tool-name', 'data-testid': 'tool-name', text: name }),
      h('span', {
        className: 'tool-outcome',
        'data-testid': 'tool-outcome',
        'data-outcome': 'pending',
        text: 'running…',
      }),
      h('span', { className: 'tool-duration', 'data-testid': 'tool-duration' }),
    ),
    h(
      'dl',
      { className: 'tool-body' },
      h('dt', { text: 'Arguments' }),
      h('dd', {}, h('pre', { className: 'tool-args', 'data-testid': 'tool-args' })),
      h('dt', { className: 'tool-output-label', text: 'Output', hidden: true }),
      h(
        'dd',
        { className: 'tool-output-value', hidden: true },
        h('pre', { className: 'tool-output', 'data-testid': 'tool-output' }),
      ),
    ),
  );
  state.cards.set(callId, card);
  updateTranscript(() => ui.transcript.append(card));
  return card;
}

function onFunctionCallItem(item) {
  const callId = item.call_id ?? item.id;
  if (item.id) state.callIdsByItem.set(item.id, callId);
  const card = findCard(callId, item.id) ?? createCard(callId, item.name ?? 'tool');
  if (item.name) setCardName(card, item.name);
  // `.added` carries arguments '' and `.done` the final ones.
  if (item.arguments) setArgsText(card, formatJson(item.arguments));
}

function setCardName(card, name) {
  card.dataset.name = name;
  card.setAttribute('aria-label', `Tool call ${name}`);
  card.querySelector('.tool-name').textContent = name;
}

function setArgsText(card, text) {
  updateTranscript(() => {
    card.querySelector('.tool-args').textContent = text;
  });
}

function appendToolArguments(callId, itemId, delta) {
  const card = findCard(callId, itemId) ?? createCard(callId ?? itemId, 'tool');
  updateTranscript(() => card.querySelector('.tool-args').append(delta));
}

function setToolArguments(callId, itemId, args, name) {
  const card = findCard(callId, itemId) ?? createCard(callId ?? itemId, name ?? 'tool');
  if (name) setCardName(card, name);
  if (typeof args === 'string') setArgsText(card, formatJson(args));
}

/** Colours and labels the outcome badge (`ok` is green, anything else is not). */
function setCardOutcome(card, outcome, label = outcome) {
  card.dataset.outcome = outcome;
  const badge = card.querySelector('.tool-outcome');
  badge.dataset.outcome = outcome;
  badge.textContent = label;
}

function onToolResult(event) {
  const card = findCard(event.call_id) ?? createCard(event.call_id, event.name ?? 'tool');
  if (event.name) setCardName(card, event.name);
  setCardOutcome(card, String(event.outcome ?? 'unknown'));
  const duration = card.querySelector('.tool-duration');
  if (typeof event.duration_ms === 'number') {
    duration.dataset.ms = String(event.duration_ms);
    duration.textContent = formatMs(event.duration_ms);
  }
  if (event.output !== undefined) {
    card.querySelector('.tool-output-label').hidden = false;
    card.querySelector('.tool-output-value').hidden = false;
    updateTranscript(() => {
      card.querySelector('.tool-output').textContent = formatJson(event.output);
    });
  }
}

// ---------------------------------------------------------------- composer

/** Sends a user message and asks for a response. */
function sendUserMessage(text) {
  if (!isOpen() || state.turn !== 'idle') return;
  addLocalUserBubble(text);
  sendEvent({
    type: 'conversation.item.create',
    item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] },
  });
  sendEvent({ type: 'response.create' });
  setTurn('requested');
}

ui.composer.addEventListener('submit', (event) => {
  event.preventDefault();
  const text = ui.input.value.trim();
  if (!text || ui.send.disabled) return;
  ui.input.value = '';
  sendUserMessage(text);
});

ui.input.addEventListener('keydown', (event) => {
  // Enter sends, Shift+Enter adds a line; never while an IME is composing.
  if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    ui.composer.requestSubmit();
  }
});

ui.stop.addEventListener('click', () => {
  if (sendEvent({ type: 'response.cancel' })) ui.stop.disabled = true;
});

ui.select.addEventListener('change', () => {
  if (ui.select.value) {
    clearErrors();
    connect(ui.select.value);
  }
});

ui.reconnect.addEventListener('click', () => {
  if (state.characterId) connect(state.characterId);
});

// ---------------------------------------------------------------- voice
//
// A later change adds speech: a microphone button goes into #voice-slot in the
// composer, streams `input_audio_buffer.append` through `sendEvent`, and plays
// `response.output_audio.delta`. The reply's text already arrives through the
// transcript events handled above, so the transcript needs no change.

// ---------------------------------------------------------------- start

loadCharacters();
