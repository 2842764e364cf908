/**
 * Troupe's web client: pick a character, chat by text or by voice, watch the
 * reply stream in (and hear it) and the character's tool calls run.
 *
 * Plain ES module, no build step and nothing fetched from elsewhere: the
 * server serves this folder as static files. The wire protocol is the OpenAI
 * Realtime API's (GA names) plus `troupe.*` events; see docs/protocol.md.
 *
 * Layout of this file: constants · elements · state · DOM helpers ·
 * characters · connection · server events · transcript · tool cards ·
 * composer · voice · start. The audio plumbing (microphone and speaker
 * worklets) is in voice.js.
 */
/* global AbortController, setTimeout, clearTimeout */

import {
  AudioPlayer,
  Pcm16Decoder,
  PCM_RATE_HZ,
  SAMPLES_PER_MS,
  VoiceError,
  bytesToBase64,
  isAbort,
  startMicrophone,
} from './voice.js';

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
/** Close code of a connection refused by policy (a missing or wrong token, a foreign origin). */
const CLOSE_POLICY = 1008;
/** How long the server may take to confirm the voice settings before the mic gives up. */
const VOICE_SETUP_TIMEOUT_MS = 5_000;
/**
 * Microphone batches kept while the server confirms the voice settings
 * (125 × 40 ms = 5 s); older ones are dropped beyond that.
 */
const MAX_PENDING_MIC_BATCHES = 125;
/**
 * Above this much unsent data on the socket (about 8 s of 24 kHz PCM16 as
 * base64) microphone audio is dropped: on a link that slow it would arrive
 * too late to be an answer to anything.
 */
const MAX_SOCKET_BUFFERED_BYTES = 512 * 1024;
/** The `event_id` prefix of the voice `session.update`, to match the server's answer to it. */
const VOICE_SETUP_EVENT_PREFIX = 'web-voice-setup-';
/** What the voice indicator says in each state. */
const VOICE_STATE_LABELS = {
  idle: 'Voice off',
  listening: 'Listening',
  'user-speaking': 'Hearing you',
  thinking: 'Thinking…',
  speaking: 'Speaking',
};

/** What the standard close codes mean, for people reading the banner. */
const CLOSE_MEANINGS = {
  1000: 'normal closure',
  1001: 'server going away',
  1006: 'connection lost',
  1008: 'refused by policy',
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
  variantPicker: byId('variant-picker'),
  variantSelect: byId('variant'),
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
  mic: byId('mic'),
  voiceState: byId('voice-state'),
  audioPlayed: byId('audio-played-ms'),
};

// ---------------------------------------------------------------- state

/** The page's query string: `?token=` (auth), `?character=` and `?variant=` (the initial pick). */
const pageParams = new URLSearchParams(location.search);
const token = pageParams.get('token');

const state = {
  /** From GET /v1/characters. */
  characters: [],
  /** The character the current (or last) socket was opened for. */
  characterId: '',
  /** The tool variant asked for (`?variant=`); '' lets the server choose. */
  variant: pageParams.get('variant') ?? '',
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
  /** Per connection: item id → every bubble showing it, in order. */
  itemBubbles: new Map(),
};

/** Microphone, speaker and the per-item audio bookkeeping (see "voice" below). */
const voice = {
  /** `off`, `starting` (permission, worklet) or `on`. */
  mic: 'off',
  /** The running capture, when `mic` is `on`. */
  capture: null,
  /** Cancels a start in progress (the button pressed again, the socket replaced). */
  startAbort: null,
  /** The socket whose session was asked for voice (once per connection). */
  configuredSocket: null,
  /** The `event_id` of that `session.update`, until the server answers it. */
  setupEventId: null,
  setupTimer: 0,
  /** The server confirmed audio in and out: microphone batches may flow. */
  sessionReady: false,
  /** The session's replies are spoken (`output_modalities` holds "audio"). */
  sessionSpeaks: false,
  /** Batches captured before the server confirmed the settings. */
  pendingMic: [],
  /** The speaker, made at the first press of the mic (a user gesture) and kept for the page. */
  player: null,
  /** The speaker could not start (its error was shown once). */
  playerFailed: false,
  /** The item whose audio is arriving, and whether more of it may come. */
  audioItemId: null,
  audioItemOpen: false,
  /** Per connection: item id → decoder (a delta may split a sample). */
  decoders: new Map(),
  /** Per connection: item id → samples received / played. */
  receivedSamples: new Map(),
  playedSamples: new Map(),
  /** Per connection: samples played in all. */
  totalPlayedSamples: 0,
  /** Items the user talked over: their late audio and text are dropped. */
  interrupted: new Set(),
  /** Items the server truncated: their text no longer grows. */
  truncated: new Set(),
  /**
   * Item id → where each audio-transcript delta went and how much of the
   * item's audio had played when it arrived. Troupe sends each word as its
   * audio plays (the audio itself runs a little ahead), so that is where the
   * word's speech starts; a truncation keeps the text whose speech had started.
   */
  transcriptMarks: new Map(),
  /** Between `speech_started` and `speech_stopped`. */
  userSpeaking: false,
  /** The user finished speaking; no response has started yet. */
  awaitingReply: false,
  /** The speaker has audio queued. */
  playing: false,
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
  const known = state.characters.some((c) => c.id === wanted);
  const first = known ? wanted : state.characters[0].id;
  ui.select.value = first;
  connect(first);
  if (wanted && !known) {
    const opened = state.characters[0];
    showError({
      code: 'unknown_character',
      message:
        `This server has no character "${wanted}", so ${opened.name || opened.id} is open instead. ` +
        `Characters: ${state.characters.map((c) => c.id).join(', ')}.`,
    });
  }
}

/** The variants of a character (from GET /v1/characters). */
function variantsOf(id) {
  const character = state.characters.find((c) => c.id === id);
  return Array.isArray(character?.variants)
    ? character.variants.filter((v) => typeof v === 'string')
    : [];
}

/**
 * Shows the variant menu when the character has more than one variant. The
 * first entry lets the server choose (its TOOL_VARIANT); a `?variant=` the
 * character lacks is still sent, so the server's error names the ones it has.
 */
function showVariants(id) {
  const variants = variantsOf(id);
  ui.variantPicker.hidden = variants.length < 2;
  const options = [h('option', { value: '', text: 'server’s choice' })];
  for (const v of variants) options.push(h('option', { value: v, text: v }));
  if (state.variant && !variants.includes(state.variant)) {
    options.push(h('option', { value: state.variant, text: `${state.variant} (unknown)` }));
  }
  ui.variantSelect.replaceChildren(...options);
  ui.variantSelect.value = state.variant;
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

/** Puts the character and variant in the page URL, so a reload comes back to them (the token stays). */
function rememberCharacter(id) {
  const url = new URL(location.href);
  url.searchParams.set('character', id);
  if (state.variant) url.searchParams.set('variant', state.variant);
  else url.searchParams.delete('variant');
  history.replaceState(null, '', url);
}

// ---------------------------------------------------------------- connection

/** The realtime URL for a character, with the page's token when it has one. */
function realtimeUrl(characterId) {
  const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
  const variant = state.variant ? `&variant=${encodeURIComponent(state.variant)}` : '';
  const query = `character=${encodeURIComponent(characterId)}${variant}`;
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
  resetVoice();
  resetConversation();
  showCharacterInfo(characterId);
  showVariants(characterId);
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
  // Audio already received plays out; the microphone has nowhere to send.
  stopMic();
  endTurn();
  const meaning = CLOSE_MEANINGS[code] ?? 'closed';
  setStatus('closed', `Disconnected (${code})`);
  ui.closeInfo.textContent =
    `Connection closed (code ${code}: ${meaning})${reason ? ` — ${reason}` : ''}.` +
    (code === CLOSE_POLICY ? ` ${tokenHint()}` : '');
  ui.closeInfo.dataset.code = String(code);
  ui.banner.hidden = false;
  updateControls();
}

/** What to do about a connection refused by policy (most often the token). */
function tokenHint() {
  return token
    ? 'The server refused the token in this page’s address (?token=…); check it against the server’s AUTH_TOKEN.'
    : 'If the server has an AUTH_TOKEN, open this page with it: add ?token=YOUR_TOKEN to the address.';
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
      onSession(event.session);
      break;
    case 'session.updated':
      onSession(event.session);
      onVoiceSession(event.session);
      break;
    case 'conversation.item.added':
    case 'conversation.item.done':
      onConversationItem(event.item, event.type === 'conversation.item.done');
      break;
    case 'response.created':
      voice.awaitingReply = false;
      setTurn('active');
      break;
    case 'response.output_text.delta':
      appendAssistantText(event.item_id ?? `response:${event.response_id}`, event.delta ?? '');
      break;
    case 'response.output_text.done':
      finishAssistantText(event.item_id ?? `response:${event.response_id}`, event.text);
      break;
    // Spoken replies carry their text as the audio's transcript.
    case 'response.output_audio_transcript.delta':
      onAudioTranscriptDelta(event.item_id ?? `response:${event.response_id}`, event.delta ?? '');
      break;
    case 'response.output_audio_transcript.done':
      onAudioTranscriptDone(event.item_id ?? `response:${event.response_id}`, event.transcript);
      break;
    case 'response.output_audio.delta':
      onAudioDelta(event.item_id ?? `response:${event.response_id}`, event.delta);
      break;
    case 'response.output_audio.done':
      if ((event.item_id ?? `response:${event.response_id}`) === voice.audioItemId) {
        voice.audioItemOpen = false;
      }
      break;
    case 'input_audio_buffer.speech_started':
      onSpeechStarted();
      break;
    case 'input_audio_buffer.speech_stopped':
    case 'input_audio_buffer.committed':
      voice.userSpeaking = false;
      voice.awaitingReply = true;
      updateVoiceState();
      break;
    case 'input_audio_buffer.cleared':
      voice.userSpeaking = false;
      voice.awaitingReply = false;
      updateVoiceState();
      break;
    case 'conversation.item.input_audio_transcription.delta':
      appendUserTranscript(event.item_id, event.delta ?? '');
      break;
    case 'conversation.item.input_audio_transcription.completed':
      finishUserTranscript(event.item_id, event.transcript);
      break;
    case 'conversation.item.input_audio_transcription.failed':
      failUserTranscript(event.item_id, event.error);
      break;
    case 'conversation.item.truncated':
      onItemTruncated(event.item_id, event.audio_end_ms);
      break;
    case 'response.output_item.added':
    case 'response.output_item.done':
      // mcp_call: a tool the server ran (the character's), in GA's words.
      if (event.item?.type === 'function_call' || event.item?.type === 'mcp_call') {
        onFunctionCallItem(event.item);
      }
      break;
    case 'response.mcp_call_arguments.delta':
      appendToolArguments(undefined, event.item_id, event.delta ?? '');
      break;
    case 'response.mcp_call_arguments.done':
      setToolArguments(undefined, event.item_id, event.arguments);
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
  onVoiceError(error);
  // The server refused our response.create before starting a response (no
  // response.created came): let the user try again. A running response ends
  // with response.done instead.
  if (state.turn === 'requested') setTurn('idle');
}

function onResponseDone(response) {
  const status = response?.status ?? 'completed';
  voice.awaitingReply = false;
  voice.audioItemOpen = false;
  // Calls that never got a result (cancelled mid-way, or client-side tools) stop spinning.
  for (const card of state.cards.values()) {
    if (card.dataset.outcome !== 'pending') continue;
    if (card.dataset.phase === 'arguments') {
      setCardOutcome(card, 'none', 'not run');
      showCardNote(
        card,
        'The reply stopped while the model was still writing these arguments, so the tool did not run.',
      );
    } else {
      setCardOutcome(card, 'none', status === 'cancelled' ? 'cancelled' : 'no result');
    }
  }
  dropUnspokenPlaces();
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
  updateVoiceState();
}

function endTurn() {
  for (const bubble of ui.transcript.querySelectorAll('.message[aria-busy="true"]')) {
    bubble.setAttribute('aria-busy', 'false');
  }
  setTurn('idle');
}

/**
 * Send needs an open socket and no running response; Stop needs a running
 * one, or a reply still playing (speech lasts longer than its response).
 */
function updateControls() {
  const open = isOpen();
  const running = state.turn !== 'idle';
  ui.input.disabled = !open;
  ui.send.disabled = !open || running;
  ui.stop.disabled = !open || (!running && !voice.playing);
  ui.composer.dataset.turn = state.turn;
  // A running microphone can always be turned off; a new one needs a session.
  ui.mic.disabled = !open && voice.mic === 'off';
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
  state.itemBubbles.clear();
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
  const list = state.itemBubbles.get(itemId);
  if (list) list.push(bubble);
  else state.itemBubbles.set(itemId, [bubble]);
  // Audio may have played before the item's first text arrived.
  if (voice.playedSamples.has(itemId)) showPlayedMs(itemId);
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
  if (isSpoken(item)) {
    onSpokenUserItem(item);
    return;
  }
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
    else if (!done && voice.sessionSpeaks) holdPlaceForSpeech(item.id);
    return;
  }
  // The finished item is authoritative, unless the text is split across
  // bubbles around a tool card (then the bubbles already hold it all), or
  // the user talked over it (then the bubble holds what they heard).
  if (
    done &&
    text &&
    state.bubbleCounts.get(item.id) === 1 &&
    !voice.interrupted.has(item.id) &&
    !voice.truncated.has(item.id)
  ) {
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
  if (!bubble || (bubble.nextElementSibling !== null && !bubble.dataset.spoken)) {
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
      'data-phase': 'arguments',
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
        text: 'writing arguments…',
      }),
      h('span', { className: 'tool-duration', 'data-testid': 'tool-duration' }),
    ),
    h(
      'dl',
      { className: 'tool-body' },
      h('dt', { text: 'Arguments' }),
      h(
        'dd',
        {},
        h('pre', { className: 'tool-args', 'data-testid': 'tool-args' }),
        h('p', { className: 'tool-note', 'data-testid': 'tool-note', hidden: true }),
      ),
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
  if (item.status === 'completed') argumentsDone(card);
}

/** The arguments are complete: the tool runs now (unless its result is already in). */
function argumentsDone(card) {
  if (card.dataset.phase !== 'arguments') return;
  card.dataset.phase = 'running';
  if (card.dataset.outcome === 'pending') setCardOutcome(card, 'pending', 'running…');
}

/** A line under a card's arguments saying what happened to them. */
function showCardNote(card, text) {
  const note = card.querySelector('.tool-note');
  updateTranscript(() => {
    note.textContent = text;
    note.hidden = false;
  });
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
  argumentsDone(card);
}

/** Colours and labels the outcome badge (`ok` is green, anything else is not). */
function setCardOutcome(card, outcome, label = outcome) {
  card.dataset.outcome = outcome;
  const badge = card.querySelector('.tool-outcome');
  badge.dataset.outcome = outcome;
  badge.textContent = label;
}

function onToolResult(event) {
  const card =
    findCard(event.call_id, event.item_id) ?? createCard(event.call_id, event.name ?? 'tool');
  if (event.name) setCardName(card, event.name);
  card.dataset.phase = 'done';
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
  if (state.turn !== 'idle' && sendEvent({ type: 'response.cancel' })) ui.stop.disabled = true;
  // Stopping a reply also silences it, and the server learns what was heard.
  cutPlayback();
});

ui.select.addEventListener('change', () => {
  if (ui.select.value) {
    // A variant belongs to one character: keep it only if the new one has it too.
    if (!variantsOf(ui.select.value).includes(state.variant)) state.variant = '';
    clearErrors();
    connect(ui.select.value);
  }
});

ui.variantSelect.addEventListener('change', () => {
  state.variant = ui.variantSelect.value;
  if (state.characterId) {
    clearErrors();
    connect(state.characterId);
  }
});

ui.reconnect.addEventListener('click', () => {
  if (state.characterId) connect(state.characterId);
});

// ---------------------------------------------------------------- voice
//
// The mic button streams the microphone as `input_audio_buffer.append`
// (24 kHz PCM16, after a `session.update` asks for audio both ways with the
// server's VAD); replies play from `response.output_audio.delta` while their
// text arrives through the transcript events. When the server hears the user
// start speaking over a reply, playback stops at once and the server learns
// how much of that item was actually played (`conversation.item.truncate`).

/** Presses of the mic button: start or stop. */
ui.mic.addEventListener('click', () => {
  if (voice.mic === 'off') startMic();
  else stopMic();
});

let voiceSetupCount = 0;

/** Starts the microphone, then asks the session for voice; errors go to the error area. */
async function startMic() {
  if (voice.mic !== 'off' || !isOpen()) return;
  const socket = state.socket;
  const controller = new AbortController();
  voice.startAbort = controller;
  voice.mic = 'starting';
  updateMic();
  // Made now, while the click still counts as the gesture browsers want before audio plays.
  ensurePlayer();
  try {
    const capture = await startMicrophone({
      signal: controller.signal,
      onAudio: onMicAudio,
      onEnded: onMicEnded,
    });
    if (controller.signal.aborted || socket !== state.socket) {
      capture.stop();
      if (!controller.signal.aborted) voice.mic = 'off';
      return;
    }
    voice.capture = capture;
    voice.mic = 'on';
    // Only once the microphone works: a refused microphone leaves the session as it was.
    configureVoiceSession();
  } catch (error) {
    // An abort means stopMic() ran (button pressed again, socket replaced) and tidied up.
    if (controller.signal.aborted || isAbort(error)) return;
    voice.mic = 'off';
    showError(
      error instanceof VoiceError
        ? error
        : { code: 'mic_failed', message: `The microphone could not be started: ${error}.` },
    );
  } finally {
    if (voice.startAbort === controller) voice.startAbort = null;
    updateMic();
    updateControls();
    updateVoiceState();
  }
}

/** Stops the microphone (tracks and worklet); a reply that is playing goes on. */
function stopMic() {
  voice.startAbort?.abort();
  voice.startAbort = null;
  voice.capture?.stop();
  voice.capture = null;
  voice.mic = 'off';
  voice.pendingMic = [];
  voice.userSpeaking = false;
  clearTimeout(voice.setupTimer);
  updateMic();
  updateControls();
  updateVoiceState();
}

function onMicEnded() {
  if (voice.mic === 'off') return;
  stopMic();
  showError({
    code: 'mic_ended',
    message:
      'The microphone stopped (unplugged, or access was withdrawn). Press the mic button to start it again.',
  });
}

/**
 * Asks the server for audio in and out with its VAD taking turns, once per
 * connection. Microphone audio waits until the server confirms, so a server
 * that refuses gets one error, not one per batch.
 */
function configureVoiceSession() {
  if (voice.configuredSocket !== state.socket || voice.configuredSocket === null) {
    voice.configuredSocket = state.socket;
    voice.sessionReady = false;
    voice.setupEventId = `${VOICE_SETUP_EVENT_PREFIX}${++voiceSetupCount}`;
    const pcm = { type: 'audio/pcm', rate: PCM_RATE_HZ };
    sendEvent({
      type: 'session.update',
      event_id: voice.setupEventId,
      session: {
        output_modalities: ['audio'],
        audio: {
          input: { format: pcm, turn_detection: { type: 'server_vad' } },
          output: { format: pcm },
        },
      },
    });
  }
  // Also when the mic was turned off and on again while the answer was still due.
  const eventId = voice.setupEventId;
  if (!eventId) return;
  clearTimeout(voice.setupTimer);
  voice.setupTimer = setTimeout(() => {
    if (voice.setupEventId !== eventId) return;
    voice.setupEventId = null;
    voice.configuredSocket = null;
    stopMic();
    showError({
      code: 'voice_setup_timeout',
      message: `The server did not confirm the voice settings within ${VOICE_SETUP_TIMEOUT_MS / 1000} s, so the microphone was turned off. Press the mic button to try again.`,
    });
  }, VOICE_SETUP_TIMEOUT_MS);
}

/** The server's echo of the session: whether replies are spoken, and the go-ahead for audio. */
function onVoiceSession(session) {
  const modalities = session?.output_modalities;
  voice.sessionSpeaks = Array.isArray(modalities) && modalities.includes('audio');
  if (voice.setupEventId && voice.sessionSpeaks) {
    voice.setupEventId = null;
    clearTimeout(voice.setupTimer);
    voice.sessionReady = true;
    const pending = voice.pendingMic;
    voice.pendingMic = [];
    for (const batch of pending) sendMicBatch(batch);
  }
  updateVoiceState();
}

/** A server error about voice: the settings were refused, or audio is not taken. */
function onVoiceError(error) {
  const refused = Boolean(voice.setupEventId) && error?.event_id === voice.setupEventId;
  if (refused) {
    voice.setupEventId = null;
    // The next press asks again (the server may be reconfigured).
    voice.configuredSocket = null;
  }
  if ((refused || error?.code === 'audio_not_supported') && voice.mic !== 'off') stopMic();
}

/** A batch from the microphone worklet (PCM16 LE, 40 ms). */
function onMicAudio(buffer) {
  if (voice.mic === 'off') return;
  if (!voice.sessionReady) {
    voice.pendingMic.push(buffer);
    if (voice.pendingMic.length > MAX_PENDING_MIC_BATCHES) voice.pendingMic.shift();
    return;
  }
  sendMicBatch(buffer);
}

function sendMicBatch(buffer) {
  const socket = state.socket;
  if (!socket || socket.bufferedAmount > MAX_SOCKET_BUFFERED_BYTES) return;
  sendEvent({ type: 'input_audio_buffer.append', audio: bytesToBase64(new Uint8Array(buffer)) });
}

/** The speaker, made once; null (after one error shown) where audio cannot play. */
function ensurePlayer() {
  if (voice.player || voice.playerFailed) return voice.player;
  const fail = (error) => {
    voice.player?.close();
    voice.player = null;
    voice.playerFailed = true;
    voice.playing = false;
    showError(error);
    updateVoiceState();
  };
  try {
    voice.player = new AudioPlayer({ onProgress: onPlayerProgress, onError: fail });
  } catch (error) {
    fail(
      new VoiceError(
        'speaker_failed',
        `Replies cannot be played in this browser (${error?.message ?? error}); their text still shows.`,
      ),
    );
  }
  return voice.player;
}

/** Samples the speaker played since its last report; `playing`: audio is still queued. */
function onPlayerProgress(played, playing) {
  for (const [itemId, samples] of played) {
    // Reports about a previous connection's items (in flight at a reset) are not counted.
    if (!voice.receivedSamples.has(itemId)) continue;
    voice.playedSamples.set(itemId, (voice.playedSamples.get(itemId) ?? 0) + samples);
    voice.totalPlayedSamples += samples;
    showPlayedMs(itemId);
  }
  showTotalPlayed();
  if (voice.playing !== playing) {
    voice.playing = playing;
    updateControls();
  }
  updateVoiceState();
}

/** `data-played-ms` on every bubble of the item: how much of its audio was heard. */
function showPlayedMs(itemId) {
  const ms = String(Math.floor((voice.playedSamples.get(itemId) ?? 0) / SAMPLES_PER_MS));
  for (const bubble of state.itemBubbles.get(itemId) ?? []) bubble.dataset.playedMs = ms;
}

function showTotalPlayed() {
  const ms = String(Math.floor(voice.totalPlayedSamples / SAMPLES_PER_MS));
  ui.audioPlayed.dataset.ms = ms;
  ui.audioPlayed.textContent = ms;
}

/** A piece of a reply's audio: decoded and queued behind what is already playing. */
function onAudioDelta(itemId, base64) {
  if (typeof base64 !== 'string' || base64 === '' || voice.interrupted.has(itemId)) return;
  let decoder = voice.decoders.get(itemId);
  if (!decoder) {
    decoder = new Pcm16Decoder();
    voice.decoders.set(itemId, decoder);
  }
  let samples;
  try {
    samples = decoder.decode(base64);
  } catch (error) {
    // One message, not one per delta: the rest of this item is dropped.
    voice.interrupted.add(itemId);
    showError(error);
    return;
  }
  voice.receivedSamples.set(itemId, (voice.receivedSamples.get(itemId) ?? 0) + samples.length);
  voice.audioItemId = itemId;
  voice.audioItemOpen = true;
  const player = ensurePlayer();
  if (!player) return;
  player.push(itemId, samples);
  // Speaking from the moment audio is queued: the response may end before the
  // speaker reports that it started, and "listening" in between would be wrong.
  // The speaker's report that it ran dry ends it.
  if (!voice.playing) {
    voice.playing = true;
    updateControls();
    updateVoiceState();
  }
}

/** Text of a spoken reply: shown like a typed reply, and remembered against the audio. */
function onAudioTranscriptDelta(itemId, delta) {
  if (!delta || voice.interrupted.has(itemId) || voice.truncated.has(itemId)) return;
  let marks = voice.transcriptMarks.get(itemId);
  if (!marks) {
    marks = [];
    voice.transcriptMarks.set(itemId, marks);
    // An item already shown in full is being spoken (the greeting, when voice
    // starts): its words now come as they are heard, so they start afresh
    // rather than repeat the text, and a barge-in cuts it to what was heard.
    // Below later messages it keeps its text instead (a copy lower down would
    // only repeat it).
    const shown = state.itemBubbles.get(itemId);
    if (shown?.length === 1 && bubbleText(shown[0]).textContent) {
      if (shown[0].nextElementSibling === null) bubbleText(shown[0]).textContent = '';
      else marks.keepShown = true;
    }
  }
  if (marks.keepShown) return;
  appendAssistantText(itemId, delta);
  const bubble = state.bubbles.get(itemId);
  if (!bubble) return;
  marks.push({
    bubble,
    offset: bubbleText(bubble).textContent.length - delta.length,
    samples: voice.playedSamples.get(itemId) ?? 0,
  });
}

function onAudioTranscriptDone(itemId, transcript) {
  if (voice.interrupted.has(itemId) || voice.truncated.has(itemId)) {
    // The full transcript includes what the user talked over: keep what was shown.
    for (const bubble of state.itemBubbles.get(itemId) ?? []) {
      bubble.setAttribute('aria-busy', 'false');
    }
    return;
  }
  finishAssistantText(itemId, transcript);
}

/** The server heard the user start speaking: a barge-in if a reply is playing. */
function onSpeechStarted() {
  voice.userSpeaking = true;
  voice.awaitingReply = false;
  updateVoiceState();
  cutPlayback();
}

/**
 * Stops playback at once and tells the server how much of each cut item was
 * played (`conversation.item.truncate`), so the character's history keeps
 * only what the user heard.
 */
async function cutPlayback() {
  const player = voice.player;
  if (!player) return;
  // Decided before waiting for the speaker: deltas still on their way for
  // these items must be dropped, not queued behind the cut.
  const openItem = voice.audioItemOpen ? voice.audioItemId : null;
  const candidates = [...voice.receivedSamples]
    .filter(([id, received]) => id === openItem || received > (voice.playedSamples.get(id) ?? 0))
    .map(([id]) => id);
  if (candidates.length === 0) return;
  for (const id of candidates) voice.interrupted.add(id);
  const socket = state.socket;
  const { dropped } = await player.interrupt();
  // A new connection since: the old session is gone, nothing to tell it.
  if (socket !== state.socket) return;
  for (const id of candidates) {
    if ((dropped.get(id) ?? 0) === 0 && id !== openItem) {
      // It had all played out after all; nothing was cut.
      voice.interrupted.delete(id);
      continue;
    }
    for (const bubble of state.itemBubbles.get(id) ?? []) bubble.setAttribute('aria-busy', 'false');
    // Without the server's item id (an older server) there is nothing to name.
    if (id.startsWith('response:')) continue;
    sendEvent({
      type: 'conversation.item.truncate',
      item_id: id,
      content_index: 0,
      audio_end_ms: Math.floor((voice.playedSamples.get(id) ?? 0) / SAMPLES_PER_MS),
    });
  }
}

/**
 * The server cut an item's audio at `audioEndMs`: its text stops growing and
 * keeps the pieces whose speech had started by then. The playback position
 * at each piece's arrival stands for its start; it trails the true start by
 * at most a progress report, so a word that was heard is never cut. (A server
 * that sends the whole transcript ahead of the audio gets no such cut: its
 * pieces all arrived before they played.)
 */
function onItemTruncated(itemId, audioEndMs) {
  if (typeof itemId !== 'string' || typeof audioEndMs !== 'number') return;
  voice.truncated.add(itemId);
  const end = audioEndMs * SAMPLES_PER_MS;
  const cuts = new Map();
  for (const mark of voice.transcriptMarks.get(itemId) ?? []) {
    if (mark.samples >= end && !cuts.has(mark.bubble)) cuts.set(mark.bubble, mark.offset);
  }
  updateTranscript(() => {
    for (const bubble of state.itemBubbles.get(itemId) ?? []) {
      const text = bubbleText(bubble);
      const keep = cuts.get(bubble) ?? text.textContent.length;
      text.textContent = text.textContent.slice(0, keep).trimEnd();
      bubble.dataset.truncated = 'true';
      bubble.setAttribute('aria-busy', 'false');
    }
  });
}

/**
 * A spoken reply's words arrive as they are heard, which can be well after a
 * tool call the model made right away; its bubble takes its place when the
 * item is announced, so the transcript reads in the order the model spoke,
 * as a typed reply does (text, then the tool card).
 */
function holdPlaceForSpeech(itemId) {
  const bubble = createBubble('assistant', '', itemId);
  bubble.dataset.spoken = 'true';
  bubble.setAttribute('aria-busy', 'true');
  trackBubble(itemId, bubble);
}

/** Places held for speech that never came (a reply of tool calls only) go at the end of a response. */
function dropUnspokenPlaces() {
  for (const bubble of ui.transcript.querySelectorAll('.message.assistant[data-spoken]')) {
    const itemId = bubble.dataset.itemId;
    if (bubbleText(bubble).textContent !== '' || voice.truncated.has(itemId)) continue;
    bubble.remove();
    state.bubbles.delete(itemId);
    state.bubbleCounts.delete(itemId);
    state.itemBubbles.delete(itemId);
  }
}

/** Whether a user item is speech (its text comes from transcription). */
function isSpoken(item) {
  return Array.isArray(item?.content) && item.content.some((p) => p?.type === 'input_audio');
}

/** The bubble of a spoken user item; made empty (and busy) when its first news arrives. */
function spokenBubble(itemId) {
  let bubble = state.bubbles.get(itemId);
  if (!bubble) {
    bubble = createBubble('user', '', itemId);
    bubble.dataset.spoken = 'true';
    bubble.setAttribute('aria-busy', 'true');
    trackBubble(itemId, bubble);
  }
  return bubble;
}

/**
 * A spoken user item entering history: its bubble appears at once, waiting
 * for the transcription; an item that already carries its transcript fills it.
 */
function onSpokenUserItem(item) {
  spokenBubble(item.id);
  const text = itemText(item);
  if (text) finishUserTranscript(item.id, text);
}

function appendUserTranscript(itemId, delta) {
  if (typeof itemId !== 'string' || !delta) return;
  const bubble = spokenBubble(itemId);
  updateTranscript(() => bubbleText(bubble).append(delta));
}

function finishUserTranscript(itemId, transcript) {
  if (typeof itemId !== 'string') return;
  // Nothing heard means no reply may come: stop showing "thinking" (a reply
  // that does start shows it again through the turn).
  if (typeof transcript === 'string' && transcript.trim() === '') voice.awaitingReply = false;
  updateVoiceState();
  const bubble = spokenBubble(itemId);
  updateTranscript(() => {
    if (typeof transcript === 'string') bubbleText(bubble).textContent = transcript;
    bubble.setAttribute('aria-busy', 'false');
    // "Nothing heard" shows (from the style sheet) instead of an empty bubble.
    if (bubbleText(bubble).textContent.trim() === '') bubble.dataset.empty = 'true';
    else delete bubble.dataset.empty;
  });
}

function failUserTranscript(itemId, error) {
  voice.awaitingReply = false;
  updateVoiceState();
  if (typeof itemId === 'string') {
    const bubble = spokenBubble(itemId);
    bubble.setAttribute('aria-busy', 'false');
    bubble.dataset.failed = 'true';
  }
  showError({
    code: error?.code || 'transcription_failed',
    message: error?.message || 'What you said could not be transcribed. Please say it again.',
  });
}

/** Forgets the previous connection's audio: the mic stops and its reply goes quiet. */
function resetVoice() {
  stopMic();
  voice.player?.interrupt();
  Object.assign(voice, {
    configuredSocket: null,
    setupEventId: null,
    sessionReady: false,
    sessionSpeaks: false,
    audioItemId: null,
    audioItemOpen: false,
    totalPlayedSamples: 0,
    userSpeaking: false,
    awaitingReply: false,
    playing: false,
  });
  voice.decoders.clear();
  voice.receivedSamples.clear();
  voice.playedSamples.clear();
  voice.interrupted.clear();
  voice.truncated.clear();
  voice.transcriptMarks.clear();
  showTotalPlayed();
  updateVoiceState();
}

/** The indicator's state, from the microphone, the server's VAD, the turn and the speaker. */
function currentVoiceState() {
  if (voice.userSpeaking && voice.mic === 'on') return 'user-speaking';
  if (voice.playing) return 'speaking';
  const inUse = voice.mic === 'on' || voice.sessionSpeaks;
  if (inUse && (voice.awaitingReply || state.turn !== 'idle')) return 'thinking';
  if (voice.mic === 'on') return 'listening';
  return 'idle';
}

function updateVoiceState() {
  const value = currentVoiceState();
  const indicator = ui.voiceState;
  // Shown while voice is in use; the mic button says the rest.
  indicator.hidden = value === 'idle';
  if (indicator.dataset.state === value) return;
  indicator.dataset.state = value;
  indicator.textContent = VOICE_STATE_LABELS[value];
}

function updateMic() {
  const on = voice.mic !== 'off';
  ui.mic.setAttribute('aria-pressed', on ? 'true' : 'false');
  ui.mic.dataset.state = voice.mic;
  ui.mic.title = on ? 'Turn the microphone off' : 'Talk: turn the microphone on';
}

// ---------------------------------------------------------------- start

loadCharacters();
