/**
 * The unmute dialect: the names and shapes Kyutai Unmute's browser frontend
 * sends and understands, so it works against Troupe unchanged. Unmute's
 * frontend picks a "voice" from `GET /v1/voices` and sends it back as
 * `session.update.session.voice`; here every voice is a character, and the
 * voice it sends back is the character's id.
 */
import { z } from 'zod';
import type { ServerEvent, SessionUpdate } from '../session/events.js';

/** The language codes Unmute's frontend knows (it starts on a random `en` voice). */
export const UNMUTE_LANGUAGES = ['en', 'fr', 'en/fr', 'fr/en'] as const;

/**
 * The `error.code` of a client event Unmute's frontend sends that Troupe has
 * no use for (its `bridge.*` events). The unmute encoder sends such errors
 * with `type: "warning"`, which Unmute's frontend logs instead of showing.
 */
export const IGNORED_EVENT_CODE = 'ignored_event';

/**
 * An Unmute `Instructions` object: `{type: "constant", text}` is a prompt the
 * user typed; other types (`smalltalk`, `quiz_show`, …) name prompts Unmute's
 * backend generates. Troupe adds `character` to the ones its voice list gives
 * out, so that sending one back means "the character's own prompt".
 */
export interface UnmuteInstructions {
  type: string;
  text?: string;
  language?: string;
  /** Set on the instructions of `GET /v1/voices`: the character they belong to. */
  character?: string;
}

/** One voice of `GET /v1/voices`, in the fields Unmute's configurator reads. */
export interface UnmuteVoice {
  /** The button's label; unique within the list (the frontend matches voices by it). */
  name: string;
  good: true;
  instructions: UnmuteInstructions;
  source: {
    source_type: 'file';
    /** What the frontend sends back as `session.voice`: the character's id. */
    path_on_server: string;
    /** Shown in the frontend's "Character" box. */
    description: string;
  };
}

/** What {@link unmuteVoiceList} needs of a character. */
export interface UnmuteVoiceInput {
  id: string;
  name: string;
  description?: string | undefined;
  /** The voice per TTS provider; `kyutai`'s is named in the description. */
  voice?: Readonly<Record<string, string>>;
  /** The character's language, when it is one of {@link UNMUTE_LANGUAGES}. */
  language?: string | undefined;
}

/**
 * Lists characters as Unmute's voice list. Each voice's `path_on_server` is
 * the character's id (so the voice the frontend sends back selects the
 * character), and its instructions carry `character` (so sending them back
 * keeps the character's own prompt, while text the user types replaces it).
 *
 * @example
 * const voices = unmuteVoiceList([{ id: 'plain', name: 'Plain', description: 'Concise.' }]);
 * // [{ name: 'Plain', good: true, instructions: { type: 'constant', text: 'Concise.', character: 'plain' }, source: {…} }]
 */
export function unmuteVoiceList(characters: readonly UnmuteVoiceInput[]): UnmuteVoice[] {
  const counts = new Map<string, number>();
  for (const c of characters) counts.set(c.name, (counts.get(c.name) ?? 0) + 1);
  return characters.map((c) => {
    const about = c.description || `The character "${c.id}".`;
    const kyutai = c.voice?.kyutai;
    const language = (UNMUTE_LANGUAGES as readonly string[]).includes(c.language ?? '')
      ? c.language
      : undefined;
    return {
      // Two characters of one name would be one button to the frontend.
      name: counts.get(c.name)! > 1 ? `${c.name} (${c.id})` : c.name,
      good: true,
      instructions: {
        type: 'constant',
        // The frontend shows a constant's text as the placeholder of its prompt box.
        text: about,
        ...(language ? { language } : {}),
        character: c.id,
      },
      source: {
        source_type: 'file',
        path_on_server: c.id,
        description: kyutai ? `${about} Kyutai TTS voice: ${kyutai}.` : about,
      },
    };
  });
}

// ── Client → server ─────────────────────────────────────────────────────────

const instructionsObject = z
  .object({
    // Unmute forks add their own types (`domestic_robot`…): any name is taken.
    type: z.string().min(1).max(64),
    text: z.string().optional(),
    language: z.string().max(16).optional(),
    character: z.string().max(256).optional(),
  })
  .refine((i) => i.type !== 'constant' || i.text !== undefined || i.character !== undefined, {
    error: 'a "constant" instructions object needs its text',
    path: ['text'],
  });

/**
 * `session.update.session` as Unmute's frontend sends it, mapped onto a
 * {@link SessionUpdate}: `voice` is the character's id; `instructions` is an
 * override only when it is text the user typed (a string or a `constant`
 * without `character`); any other instructions object means the character's
 * own prompt, given as `''` (which also drops an earlier override).
 */
export const unmuteSessionSchema = z
  .strictObject({
    instructions: z.union([z.string(), instructionsObject]).nullable().optional(),
    voice: z.string().min(1).max(256).nullable().optional(),
    allow_recording: z.boolean().optional(),
  })
  .transform((s): SessionUpdate => {
    const out: SessionUpdate = {};
    if (s.voice != null) out.character = s.voice;
    if (typeof s.instructions === 'string') out.instructions = s.instructions;
    else if (s.instructions != null) {
      const typed = s.instructions.type === 'constant' && s.instructions.character === undefined;
      out.instructions = typed ? s.instructions.text! : '';
    }
    if (s.allow_recording !== undefined) out.allow_recording = s.allow_recording;
    return out;
  });

// ── Server → client ─────────────────────────────────────────────────────────

/** Options of {@link createUnmuteShaper}. */
export interface UnmuteShaperOptions {
  /**
   * The session's character, the `voice` of `response.created` until a
   * `session.updated` names one.
   * @defaultValue none (`"missing"`, as Unmute's backend says)
   */
  character?: string;
}

/** Turns session events into Unmute's events, remembering what they need. */
export interface UnmuteShaper {
  /** The event as Unmute's backend would send it (no `event_id`), or null when it sends none such. */
  shape(event: ServerEvent): Record<string, unknown> | null;
  /** Notes a session update the session does not echo (`allow_recording`). */
  observe(update: SessionUpdate): void;
}

/**
 * Creates the unmute shaping of one connection. Unmute's frontend warns about
 * every event type it does not know, so only Unmute's own vocabulary goes
 * out: audio and its text, the user's transcript, VAD, `response.created`,
 * `session.updated`, errors and the `unmute.*` events. Items, `response.done`,
 * text-modality output, tool events and `session.created` are not sent.
 *
 * @example
 * const unmute = createUnmuteShaper({ character: 'plain' });
 * unmute.shape({ type: 'response.output_audio.done', ...place }); // { type: 'response.audio.done' }
 */
export function createUnmuteShaper(options: UnmuteShaperOptions = {}): UnmuteShaper {
  let character = options.character;
  let allowRecording = false;
  const debug = createDebugDict();
  return {
    shape: function shapeUnmuteEvent(event) {
      debug.observe(event);
      switch (event.type) {
        case 'session.created':
          character = event.session.character;
          return null;
        case 'session.updated':
          character = event.session.character;
          return {
            type: 'session.updated',
            session: {
              instructions: { type: 'constant', text: event.session.instructions },
              voice: event.session.character,
              allow_recording: allowRecording,
            },
          };
        case 'response.created':
          return {
            type: 'response.created',
            response: {
              object: 'realtime.response',
              status: event.response.status,
              voice: event.response.troupe?.character ?? character ?? 'missing',
              chat_history: [],
            },
          };
        case 'response.output_audio.delta':
          return { type: 'response.audio.delta', delta: event.delta };
        case 'response.output_audio.done':
          return { type: 'response.audio.done' };
        // Unmute's "text" is the text as spoken: the audio's transcript. Its backend
        // sends the TTS's words without spaces and its frontend puts one before each.
        case 'response.output_audio_transcript.delta': {
          const delta = event.delta.trim();
          return delta === '' ? null : { type: 'response.text.delta', delta };
        }
        case 'response.output_audio_transcript.done':
          return { type: 'response.text.done', text: event.transcript };
        case 'conversation.item.input_audio_transcription.delta':
          return { type: event.type, delta: event.delta, start_time: event.start_time ?? 0 };
        // Unmute has no such event, and a user whose speech is not heard should know why.
        case 'conversation.item.input_audio_transcription.failed':
          return {
            type: 'error',
            error: { ...event.error, type: 'server_error', param: null, event_id: null },
          };
        case 'error':
          return event.error.code === IGNORED_EVENT_CODE
            ? { ...event, error: { ...event.error, type: 'warning' } }
            : event;
        case 'unmute.additional_outputs':
          // Its frontend's dev panel shows debug_dict: Troupe's timings, in Unmute's keys.
          return {
            ...event,
            args: { ...event.args, debug_dict: debug.value(event.args.debug_dict) },
          };
        case 'input_audio_buffer.speech_started':
        case 'input_audio_buffer.speech_stopped':
        case 'unmute.response.text.delta.ready':
        case 'unmute.interrupted_by_vad':
          return event;
        default:
          return null;
      }
    },
    observe(update) {
      if (update.allow_recording !== undefined) allowRecording = update.allow_recording;
    },
  };
}

/**
 * The `debug_dict` of `unmute.additional_outputs`, as Unmute's backend fills
 * it (`timing` in seconds, `connection`, `tts_voice`, `conversation_state`),
 * from the events a connection sees: the latest response's timings, and
 * Troupe's own report of it (`troupe`, in ms) beside them.
 */
function createDebugDict() {
  const timing: Record<string, number> = {};
  let troupe: object | undefined;
  let voice: string | null = null;
  let state = 'waiting_for_user';
  let responses = 0;
  const seconds = (ms: number | null | undefined) =>
    ms === null || ms === undefined ? undefined : Math.round(ms) / 1000;
  const set = (key: string, ms: number | null | undefined) => {
    const s = seconds(ms);
    if (s !== undefined) timing[key] = s;
  };
  return {
    observe(event: ServerEvent): void {
      switch (event.type) {
        case 'session.created':
        case 'session.updated':
          voice = event.session.audio.output.voice ?? null;
          return;
        case 'input_audio_buffer.speech_started':
          state = 'user_speaking';
          return;
        case 'input_audio_buffer.speech_stopped':
          state = 'waiting_for_bot';
          return;
        case 'response.created':
          state = 'bot_speaking';
          return;
        case 'response.done': {
          state = 'waiting_for_user';
          responses++;
          const info = event.response.troupe;
          if (!info) return;
          troupe = { response: event.response.id, status: event.response.status, ...info };
          for (const key of Object.keys(timing)) delete timing[key];
          set('to_first_token', info.llm_ttft_ms);
          set('to_first_text', info.ttft_ms);
          set('tts_audio', info.first_audio_ms);
          set('stt', info.voice?.stt_ms);
          set('total', info.duration_ms);
          return;
        }
        default:
      }
    },
    value(given: object | undefined): object {
      return {
        timing: { ...timing },
        connection: { server: 'troupe' },
        tts_voice: voice ?? 'none',
        conversation_state: state,
        responses,
        ...(troupe ? { troupe } : {}),
        ...given,
      };
    },
  };
}
