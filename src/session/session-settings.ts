/**
 * Session settings: validates `session.update`, holds what it set, and gives
 * the effective session object (`session.created` / `session.updated`).
 */
import type { CharacterOpening } from '../characters/conversation.js';
import type { LoadedCharacter } from '../characters/types.js';
import { ProtocolError } from '../errors.js';
import type {
  AudioFormat,
  GaSessionSettings,
  SessionObject,
  SessionUpdate,
  ToolChoice,
  TurnDetection,
} from './events.js';
import type { SettingsState, TurnSettings } from './session-state.js';
import {
  ENCODING_OF_FORMAT,
  FORMAT_OF_ENCODING,
  formatRateProblem,
  type AudioEncoding,
  type SessionVoice,
  type VoiceSettings,
} from './voice-settings.js';
import { resolveVoice, type ResolvedVoice } from '../voice/voices.js';

/** A voice frontend's defaults (see `Session.configureVoice`). */
export interface VoiceDefaults {
  format: AudioEncoding;
  outputModalities: Array<'text' | 'audio'>;
}

/** What a session's settings start as. */
export function defaultSettings(kit: SessionVoice | undefined): SettingsState {
  return {
    instructions: null,
    tools: [],
    toolChoice: 'auto',
    temperature: null,
    maxOutputTokens: 'inf',
    voice: null,
    outputModalities: ['text'],
    inputEncoding: 'pcm16',
    outputEncoding: 'pcm16',
    turnDetection: kit ? defaultTurn(kit.settings) : null,
    shareHistory: false,
  };
}

function defaultTurn(settings: VoiceSettings): TurnSettings {
  return { ...settings.vad, createResponse: true, interruptResponse: true };
}

/** What an applied update changed that other parts must hear of. */
export interface SettingsChange {
  inputEncoding: boolean;
  turnDetection: boolean;
}

/** A session's settings: `session.update` checked and applied. */
export class SessionConfig {
  readonly #state: SettingsState;
  readonly #kit: SessionVoice | undefined;

  constructor(state: SettingsState, kit: SessionVoice | undefined) {
    this.#state = state;
    this.#kit = kit;
  }

  /** The settings now (read-only: change them through `apply`). */
  get current(): Readonly<SettingsState> {
    return this.#state;
  }

  /**
   * Checks an update against the character that will serve after it: audio
   * settings, client tools (no clash with the character's, no duplicates)
   * and a tool_choice that names a tool.
   */
  check(
    u: SessionUpdate,
    next: LoadedCharacter,
    eventId: string | null,
    transfers: readonly string[] = [],
  ): ProtocolError | undefined {
    const err = (code: string, message: string, param: string) =>
      new ProtocolError(code, message, { param, eventId });
    const audioProblem = checkAudioUpdate(u, this.#kit, eventId);
    if (audioProblem) return audioProblem;
    const serverTools = new Set(next.toolNames);
    // The client tools and tool_choice in effect after the update: a new
    // character or a new tool list can leave old ones clashing or dangling,
    // which the LLM would refuse on the next turn.
    const tools = u.tools ?? this.#state.tools;
    const seen = new Set<string>();
    for (const [i, t] of tools.entries()) {
      if (serverTools.has(t.name)) {
        if (u.tools === undefined) {
          return err(
            'invalid_value',
            `session.update: session.character: the session's client tool "${t.name}" has the name of a tool of character "${next.id}", run by the server; send session.tools without it in the same update.`,
            'session.character',
          );
        }
        return err(
          'invalid_value',
          `session.update: session.tools[${i}].name: "${t.name}" is a tool of the character, run by the server; give the client's tool another name.`,
          `session.tools[${i}].name`,
        );
      }
      if (seen.has(t.name)) {
        return err(
          'invalid_value',
          `session.update: session.tools[${i}].name: "${t.name}" is listed twice.`,
          `session.tools[${i}].name`,
        );
      }
      seen.add(t.name);
    }
    return checkToolChoice(
      u,
      u.tool_choice ?? this.#state.toolChoice,
      [...serverTools, ...transfers, ...tools.map((t) => t.name)],
      eventId,
    );
  }

  /** Applies a checked update; says what changed that voice input must follow. */
  apply(u: SessionUpdate): SettingsChange {
    const s = this.#state;
    if (u.instructions !== undefined) s.instructions = u.instructions || null;
    if (u.tools !== undefined) s.tools = u.tools;
    if (u.tool_choice !== undefined) s.toolChoice = u.tool_choice;
    if (u.temperature !== undefined) s.temperature = u.temperature;
    if (u.max_output_tokens !== undefined) s.maxOutputTokens = u.max_output_tokens;
    if (u.voice !== undefined) s.voice = u.voice || null;
    if (u.output_modalities !== undefined) s.outputModalities = u.output_modalities;
    if (u.input_audio_format !== undefined) s.inputEncoding = encodingOf(u.input_audio_format);
    if (u.output_audio_format !== undefined) s.outputEncoding = encodingOf(u.output_audio_format);
    if (u.turn_detection !== undefined) this.#setTurnDetection(u.turn_detection);
    if (u.greeting !== undefined) s.greeting = u.greeting;
    s.ga = applyGa(s.ga ?? GA_DEFAULTS, u);
    return {
      inputEncoding: u.input_audio_format !== undefined,
      turnDetection: u.turn_detection !== undefined && this.#kit !== undefined,
    };
  }

  /** A new character starts without the old one's instructions. */
  resetInstructions(): void {
    this.#state.instructions = null;
  }

  /**
   * After a handoff: drops the client's voice (the character's is used: a new
   * speaker) and a tool_choice naming a tool the new character is not offered
   * (a forced `transfer_to_<id>` has done its work): back to `auto`.
   */
  resetForHandoff(next: LoadedCharacter, transfers: readonly string[]): void {
    const s = this.#state;
    s.voice = null;
    const choice = s.toolChoice;
    if (typeof choice !== 'object') return;
    const offered = [...next.toolNames, ...transfers, ...s.tools.map((t) => t.name)];
    if (!offered.includes(choice.name)) s.toolChoice = 'auto';
  }

  /** A voice frontend's defaults (the unmute dialect: Ogg/Opus both ways, spoken replies). */
  applyVoiceDefaults(defaults: VoiceDefaults): void {
    const s = this.#state;
    s.shareHistory = true;
    s.inputEncoding = defaults.format;
    s.outputEncoding = defaults.format;
    s.outputModalities = this.#kit?.tts ? defaults.outputModalities : ['text'];
  }

  #setTurnDetection(t: TurnDetection | null): void {
    const kit = this.#kit;
    if (!kit) return;
    if (t === null) {
      this.#state.turnDetection = null;
      return;
    }
    const base = this.#state.turnDetection ?? defaultTurn(kit.settings);
    this.#state.turnDetection = {
      threshold: t.threshold ?? base.threshold,
      prefixPaddingMs: t.prefix_padding_ms ?? base.prefixPaddingMs,
      silenceDurationMs: t.silence_duration_ms ?? base.silenceDurationMs,
      createResponse: t.create_response ?? base.createResponse,
      interruptResponse: t.interrupt_response ?? base.interruptResponse,
      // GA: server_vad only (semantic_vad arrives with its eagerness and has none).
      idleTimeoutMs:
        t.eagerness !== undefined
          ? null
          : t.idle_timeout_ms !== undefined
            ? t.idle_timeout_ms
            : (base.idleTimeoutMs ?? null),
    };
  }

  /** The TTS voice: the client's choice, else the character's for this engine. */
  ttsVoice(character: LoadedCharacter): string | undefined {
    return this.resolvedVoice(character).voice;
  }

  /**
   * The voice the engine will use, and why not the one asked for: OpenAI's
   * voice names are mapped to the engine's, an unknown one falls back.
   */
  resolvedVoice(character: LoadedCharacter): ResolvedVoice {
    const tts = this.#kit?.tts;
    const voice = this.#state.voice ?? undefined;
    if (!tts) return { voice };
    const characterVoice = character.voice[tts.name];
    if (!tts.voiceEngine) return { voice: voice ?? characterVoice };
    return resolveVoice(tts.voiceEngine, voice, characterVoice);
  }

  /** The system prompt in effect: the client's instructions, else the character's. */
  systemPrompt(opening: CharacterOpening): string {
    return this.#state.instructions ?? opening.systemPrompt;
  }

  /** The session as `session.created` and `session.updated` show it. */
  sessionObject(
    id: string,
    character: LoadedCharacter,
    opening: CharacterOpening,
    metadata: Record<string, unknown>,
  ): SessionObject {
    const s = this.#state;
    const turn = s.turnDetection;
    const ga = s.ga ?? GA_DEFAULTS;
    return {
      type: 'realtime',
      object: 'realtime.session',
      id,
      model: character.llm.model ?? 'troupe',
      character: character.id,
      instructions: this.systemPrompt(opening),
      output_modalities: s.outputModalities,
      tools: s.tools,
      tool_choice: s.toolChoice,
      // The temperature the LLM is sent; none (the LLM server's own default) leaves it out.
      ...temperatureOf(s.temperature ?? character.llm.temperature),
      max_output_tokens: s.maxOutputTokens,
      audio: {
        input: {
          format: formatObject(s.inputEncoding),
          turn_detection: turn && {
            type: 'server_vad',
            threshold: turn.threshold,
            prefix_padding_ms: turn.prefixPaddingMs,
            silence_duration_ms: turn.silenceDurationMs,
            create_response: turn.createResponse,
            interrupt_response: turn.interruptResponse,
            idle_timeout_ms: turn.idleTimeoutMs ?? null,
          },
          transcription: ga.transcription,
          noise_reduction: ga.noiseReduction,
        },
        output: {
          format: formatObject(s.outputEncoding),
          // What speaks: the engine's default when neither client nor character names a voice.
          ...voiceOf(this.ttsVoice(character) ?? this.#kit?.tts?.defaultVoice),
          speed: ga.speed,
        },
      },
      truncation: ga.truncation,
      include: ga.include,
      prompt: ga.prompt,
      tracing: ga.tracing,
      // The connection sets it (`SESSION_MAX_DURATION_S` runs from its start).
      expires_at: 0,
      troupe: {
        character: {
          id: character.id,
          name: character.name,
          description: character.description ?? '',
          variant: opening.variant,
          tools: [...character.toolNames],
          greeting: character.greeting ?? null,
        },
        greeting: s.greeting !== false,
        metadata,
        ...this.#voiceWarning(character),
      },
    };
  }

  /** A voice the engine does not have is never a failed response: it falls back, and says so here. */
  #voiceWarning(character: LoadedCharacter): { voice_warning?: string } {
    const { warning } = this.resolvedVoice(character);
    return warning === undefined ? {} : { voice_warning: warning };
  }
}

/** `{voice}` when there is one (none: a server without TTS, or an engine that does not say). */
function voiceOf(voice: string | undefined): { voice?: string } {
  return voice === undefined ? {} : { voice };
}

/** `{temperature}` when there is one, else nothing: the schema has no null for it. */
function temperatureOf(t: number | null | undefined): { temperature?: number } {
  return t === null || t === undefined ? {} : { temperature: t };
}

function checkToolChoice(
  u: SessionUpdate,
  choice: ToolChoice,
  toolNames: readonly string[],
  eventId: string | null,
): ProtocolError | undefined {
  const names = new Set(toolNames);
  if (choice === 'required' && names.size === 0) {
    // The LLM refuses a forced tool call with no tools to call.
    const param = u.tool_choice === undefined ? 'session.tools' : 'session.tool_choice';
    return new ProtocolError(
      'invalid_value',
      u.tool_choice === undefined
        ? 'session.update: session.tools: the session\'s tool_choice is "required", and this update leaves no tool to call; send a tool_choice ("auto" or "none") in the same update, or keep a tool.'
        : 'session.update: session.tool_choice: "required" forces a tool call, and this session offers no tools; offer a tool in session.tools, or use "auto" or "none".',
      { param, eventId },
    );
  }
  if (typeof choice !== 'object') return undefined;
  if (names.has(choice.name)) return undefined;
  const available = [...names].join(', ') || 'none';
  if (u.tool_choice === undefined) {
    return new ProtocolError(
      'invalid_value',
      `session.update: session.tool_choice: the session's tool_choice names "${choice.name}", which this update takes away; tools: ${available}. Send a tool_choice in the same update.`,
      { param: 'session.tool_choice', eventId },
    );
  }
  return new ProtocolError(
    'invalid_value',
    `session.update: session.tool_choice.name: no tool "${choice.name}"; tools: ${available}.`,
    { param: 'session.tool_choice.name', eventId },
  );
}

function checkAudioUpdate(
  u: SessionUpdate,
  kit: SessionVoice | undefined,
  eventId: string | null,
): ProtocolError | undefined {
  const err = (code: string, message: string, param: string) =>
    new ProtocolError(code, message, { param, eventId });
  if (u.output_modalities?.includes('audio') && !kit?.tts) {
    return err(
      'audio_not_supported',
      'session.update: session.output_modalities: this server has no text-to-speech engine (TTS_PROVIDER=none); use ["text"].',
      'session.output_modalities',
    );
  }
  if (u.turn_detection && !kit) {
    return err(
      'audio_not_supported',
      'session.update: session.audio.input.turn_detection: this server takes no audio; send text.',
      'session.audio.input.turn_detection',
    );
  }
  if (u.turn_detection && u.turn_detection.type !== 'server_vad') {
    return err(
      'invalid_value',
      `session.update: session.audio.input.turn_detection.type: "${u.turn_detection.type}" is not offered; use "server_vad", or null to commit turns yourself.`,
      'session.audio.input.turn_detection.type',
    );
  }
  for (const [key, param] of [
    ['input_audio_format', 'session.audio.input.format'],
    ['output_audio_format', 'session.audio.output.format'],
  ] as const) {
    const f = u[key];
    const problem = f && formatRateProblem(f);
    if (problem)
      return err('invalid_value', `session.update: ${param}.rate: ${problem}`, `${param}.rate`);
  }
  return undefined;
}

function formatObject(encoding: AudioEncoding): AudioFormat {
  return { ...FORMAT_OF_ENCODING[encoding] };
}

function encodingOf(format: AudioFormat): AudioEncoding {
  return ENCODING_OF_FORMAT[format.type];
}

/** The GA API's defaults for the settings of {@link GaSessionSettings}. */
const GA_DEFAULTS: GaSessionSettings = {
  transcription: null,
  noiseReduction: null,
  speed: 1,
  truncation: 'auto',
  include: [],
  prompt: null,
  tracing: null,
};

function applyGa(g: GaSessionSettings, u: SessionUpdate): GaSessionSettings {
  return {
    transcription:
      u.input_audio_transcription !== undefined ? u.input_audio_transcription : g.transcription,
    noiseReduction:
      u.input_audio_noise_reduction !== undefined
        ? u.input_audio_noise_reduction
        : g.noiseReduction,
    speed: u.output_audio_speed ?? g.speed,
    truncation: u.truncation ?? g.truncation,
    include: u.include ?? g.include,
    prompt: u.prompt !== undefined ? u.prompt : g.prompt,
    tracing: u.tracing !== undefined ? u.tracing : g.tracing,
  };
}
