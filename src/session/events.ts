/**
 * The session's vocabulary: client and server events, items and the session object, in the
 * OpenAI Realtime API's GA names and shapes (`protocol/` parses and encodes them per dialect).
 */
import type { ToolOutcome } from '../tools/types.js';

// ── Items (conversation history as the client sees it) ─────────────────────

/** A content part of a message item. */
export type ContentPart =
  | { type: 'input_text'; text: string }
  | { type: 'input_image'; image_url: string; detail?: 'auto' | 'low' | 'high' }
  | { type: 'input_audio'; audio?: string; transcript?: string | null }
  | { type: 'output_text'; text: string }
  | { type: 'output_audio'; audio?: string; transcript?: string | null };

/** A message in the conversation. */
export interface MessageItem {
  id: string;
  object: 'realtime.item';
  type: 'message';
  status: 'completed' | 'in_progress' | 'incomplete';
  role: 'user' | 'assistant' | 'system';
  content: ContentPart[];
}

/** A tool call the model made (server-side or client-side). */
export interface FunctionCallItem {
  id: string;
  object: 'realtime.item';
  type: 'function_call';
  status: 'completed' | 'in_progress' | 'incomplete';
  call_id: string;
  name: string;
  arguments: string;
}

/** The result of a tool call, from the server's handler or from the client. */
export interface FunctionCallOutputItem {
  id: string;
  object: 'realtime.item';
  type: 'function_call_output';
  call_id: string;
  output: string;
}

/** Why a server-run tool failed, in GA's `mcp_call.error` shape. */
export interface McpCallError {
  type: 'tool_execution_error';
  message: string;
}

/**
 * A tool the server ran itself (a character's tool), in GA's words for tools
 * the server runs: clients know not to answer it. `server_label` is the
 * character's id.
 */
export interface McpCallItem {
  id: string;
  object: 'realtime.item';
  type: 'mcp_call';
  server_label: string;
  name: string;
  arguments: string;
  /** The handler's result; null until it is done, and when it failed. */
  output: string | null;
  error: McpCallError | null;
  approval_request_id: null;
}

/** Any conversation item. */
export type Item = MessageItem | FunctionCallItem | FunctionCallOutputItem | McpCallItem;

// ── Client → session ────────────────────────────────────────────────────────

/** A function tool the client offers (and runs) itself. */
export interface ClientTool {
  type: 'function';
  name: string;
  description: string;
  parameters: Record<string, unknown>;
  /** Strict schema adherence, as the Responses API takes it; Troupe validates arguments either way. */
  strict?: boolean;
}

/** Tool choice as the Realtime API takes it. */
export type ToolChoice = 'auto' | 'none' | 'required' | { type: 'function'; name: string };

/** Audio formats: GA objects; beta strings are mapped to these by the protocol. */
export interface AudioFormat {
  type: 'audio/pcm' | 'audio/pcmu' | 'audio/pcma' | 'audio/ogg';
  rate?: number;
}

/** Server VAD settings (`null` = manual turn taking). */
export interface TurnDetection {
  type: 'server_vad' | 'semantic_vad';
  threshold?: number;
  prefix_padding_ms?: number;
  silence_duration_ms?: number;
  create_response?: boolean;
  interrupt_response?: boolean;
  /** `semantic_vad` only; Troupe runs it as the server VAD with a silence window per level. */
  eagerness?: 'low' | 'medium' | 'high' | 'auto';
  /** `server_vad` only: silence after a response before `input_audio_buffer.timeout_triggered`; null = off. */
  idle_timeout_ms?: number | null;
}

/** `audio.input.transcription`: which transcription the client asked for. */
export interface TranscriptionSettings {
  model?: string;
  language?: string;
  prompt?: string;
  delay?: 'minimal' | 'low' | 'medium' | 'high' | 'xhigh';
}

/** `audio.input.noise_reduction`. */
export interface NoiseReduction {
  type?: 'near_field' | 'far_field';
}

/** `truncation`: how the conversation is cut when it outgrows the context. */
export type Truncation =
  | 'auto'
  | 'disabled'
  | {
      type: 'retention_ratio';
      retention_ratio: number;
      token_limits?: { post_instructions?: number };
    };

/** `prompt`: a stored prompt template by id. */
export interface PromptReference {
  id: string;
  version?: string | null;
  variables?: Record<string, unknown> | null;
}

/** `tracing`: `"auto"` or a tracing configuration. */
export type TracingSetting =
  'auto' | { workflow_name?: string; group_id?: string; metadata?: unknown };

/** `reasoning`. */
export interface Reasoning {
  effort?: 'minimal' | 'low' | 'medium' | 'high' | 'xhigh';
}

/** `session.update.session`, normalised (beta fields mapped to GA). Absent = unchanged. */
export interface SessionUpdate {
  character?: string;
  instructions?: string;
  voice?: string;
  tools?: ClientTool[];
  tool_choice?: ToolChoice;
  output_modalities?: Array<'text' | 'audio'>;
  input_audio_format?: AudioFormat;
  output_audio_format?: AudioFormat;
  turn_detection?: TurnDetection | null;
  temperature?: number;
  max_output_tokens?: number | 'inf';
  /** Unmute's frontend sends it. */
  allow_recording?: boolean;
  // GA settings taken as typed values (see protocol/ga-values.ts); null = off / cleared.
  /** The model the client named; the character decides the real one. */
  model?: string;
  input_audio_transcription?: TranscriptionSettings | null;
  input_audio_noise_reduction?: NoiseReduction | null;
  /** `audio.output.speed`, 0.25–1.5. */
  output_audio_speed?: number;
  truncation?: Truncation;
  include?: Array<'item.input_audio_transcription.logprobs'>;
  prompt?: PromptReference | null;
  tracing?: TracingSetting | null;
  parallel_tool_calls?: boolean;
  reasoning?: Reasoning;
  /** `session.troupe.greeting`: false turns the character's greeting off. */
  greeting?: boolean;
  /** `session.troupe.metadata`: the prompt generator's `ctx.metadata` from now on (checked). */
  metadata?: Record<string, unknown>;
}

/** An item the client adds. */
export type ClientItem =
  | {
      type: 'message';
      id?: string;
      role: 'user' | 'assistant' | 'system';
      content: ContentPart[];
    }
  | { type: 'function_call_output'; id?: string; call_id: string; output: string };

/** A call the client records as made (GA `function_call` item); its output may follow. */
export interface ClientFunctionCallItem {
  type: 'function_call';
  id?: string;
  call_id?: string;
  name: string;
  arguments: string;
}

/** A reference to an item the conversation holds (GA `item_reference`, in `response.input`). */
export interface ItemReference {
  type: 'item_reference';
  id: string;
}

/** An item of `response.input`. */
export type InputItem = ClientItem | ClientFunctionCallItem | ItemReference;

/** `response.create.response`, normalised. */
export interface ResponseOptions {
  instructions?: string;
  output_modalities?: Array<'text' | 'audio'>;
  tool_choice?: ToolChoice;
  temperature?: number;
  max_output_tokens?: number | 'inf';
  metadata?: Record<string, string>;
  /** `"none"`: an out-of-band response, outside the conversation. @defaultValue "auto" */
  conversation?: 'auto' | 'none';
  /** The response's input instead of the conversation (GA `response.input`). */
  input?: InputItem[];
  /** Tools for this response only, instead of the session's client tools. */
  tools?: ClientTool[];
  /** `audio.output.voice` (beta `voice`) for this response. */
  voice?: string;
  /** `audio.output.format` for this response. */
  output_audio_format?: AudioFormat;
  prompt?: PromptReference | null;
  parallel_tool_calls?: boolean;
  reasoning?: Reasoning;
}

/** A client event after validation (GA names; `event_id` is the client's own). */
export type ClientEvent = { event_id?: string } & (
  | { type: 'session.update'; session: SessionUpdate }
  | {
      type: 'conversation.item.create';
      previous_item_id?: string | null;
      item: ClientItem | ClientFunctionCallItem;
    }
  | { type: 'conversation.item.retrieve'; item_id: string }
  | { type: 'conversation.item.delete'; item_id: string }
  | {
      type: 'conversation.item.truncate';
      item_id: string;
      content_index: number;
      audio_end_ms: number;
    }
  | { type: 'response.create'; response?: ResponseOptions }
  | { type: 'response.cancel'; response_id?: string }
  | { type: 'input_audio_buffer.append'; audio: string }
  | { type: 'input_audio_buffer.commit' }
  | { type: 'input_audio_buffer.clear' }
);

/** The type of every client event. */
export type ClientEventType = ClientEvent['type'];

// ── Session → client ────────────────────────────────────────────────────────

/** Token counts of a response, in the Realtime shape. */
export interface ResponseUsage {
  total_tokens: number;
  input_tokens: number;
  output_tokens: number;
  /** The LLM reads text: every input token is a text token (speech is transcribed first). */
  input_token_details: {
    text_tokens: number;
    audio_tokens: 0;
    image_tokens: 0;
    cached_tokens: 0;
    cached_tokens_details: { text_tokens: 0; audio_tokens: 0; image_tokens: 0 };
  };
  /** The LLM writes text: speech is made from it by the TTS engine, outside the token count. */
  output_token_details: { text_tokens: number; audio_tokens: 0 };
}

/** One server-side or client-side tool call of a response, as `response.done` reports it. */
export interface ResponseToolCall {
  call_id: string;
  name: string;
  /**
   * `pending_client` for a client-side call awaiting its output;
   * `background_started` for a background call that began (its outcome comes
   * in `troupe.background_tool.done`).
   */
  outcome: ToolOutcome | 'pending_client' | 'background_started';
  duration_ms: number;
}

/** Troupe's additions to a response: timings and tools. */
export interface ResponseTroupeInfo {
  character: string;
  variant: string;
  /** `response.create` received → first text delta sent. */
  ttft_ms: number | null;
  /** Request sent to the LLM → its first token (the first chunk with output), first round. */
  llm_ttft_ms: number | null;
  /** Spoken replies: response start (or the end of the user's speech) → first audio sent. */
  first_audio_ms?: number;
  /** Spoken replies: where the time to first audio went. */
  voice?: VoiceTimings;
  duration_ms: number;
  /**
   * Part of `usage` is estimated (about 4 characters a token): a request
   * was cut after the model began, before the server's own count came.
   */
  usage_estimated?: true;
  tool_rounds: number;
  llm_requests: number;
  /** One entry per LLM request, in order: where the response's time went. */
  rounds: ResponseRound[];
  tools: ResponseToolCall[];
}

/** One LLM request of a response, ms. */
export interface ResponseRound {
  /** Request sent → first token (the first chunk with output); null when none came. */
  llm_ttft_ms: number | null;
  /**
   * Request sent → the stream's end: the model's time (with Troupe's
   * handling of each chunk as it streams); null when no chunk came.
   */
  llm_ms: number | null;
  /** The round's longest tool handler (they run in parallel); 0 without tools. */
  handler_ms: number;
  /** The stream's end → the next round's request, handler time excluded; null for the last round. */
  overhead_ms: number | null;
}

/**
 * A spoken response's path to its first audio byte, ms: STT (end of speech →
 * transcript; null when the response was not started by speech), LLM
 * (request → first clause complete), TTS (clause → first audio), and the
 * rest — Troupe's own share.
 */
export interface VoiceTimings {
  stt_ms: number | null;
  llm_ms: number | null;
  tts_ms: number | null;
  troupe_ms: number | null;
}

/** The response object of `response.created` / `response.done`. */
export interface ResponseObject {
  object: 'realtime.response';
  id: string;
  status: 'in_progress' | 'completed' | 'cancelled' | 'incomplete' | 'failed';
  status_details: null | {
    type: 'cancelled' | 'incomplete' | 'failed';
    reason?: string;
    error?: { type: string; code: string; message: string };
  };
  output: Item[];
  output_modalities: Array<'text' | 'audio'>;
  usage: ResponseUsage | null;
  metadata: Record<string, string> | null;
  /** The session's one conversation; null for an out-of-band response (`conversation: "none"`). */
  conversation_id?: string | null;
  troupe?: ResponseTroupeInfo;
}

/** The character serving a session, as `session.created/updated` shows it. */
export interface SessionCharacterInfo {
  id: string;
  name: string;
  description: string;
  variant: string;
  tools: string[];
  greeting: string | null;
}

/** The effective session, echoed on connect and after each update. */
export interface SessionObject {
  type: 'realtime';
  object: 'realtime.session';
  id: string;
  model: string;
  /** The character's id. */
  character: string;
  instructions: string;
  output_modalities: Array<'text' | 'audio'>;
  tools: ClientTool[];
  tool_choice: ToolChoice;
  /** The temperature the LLM is sent (the session's, else the character's); absent when neither sets one. */
  temperature?: number;
  max_output_tokens: number | 'inf';
  audio: {
    input: {
      format: AudioFormat;
      turn_detection: TurnDetection | null;
      transcription: TranscriptionSettings | null;
      noise_reduction: NoiseReduction | null;
    };
    /** `voice`: the voice that speaks; absent on a server without TTS (or whose engine does not say). */
    output: { format: AudioFormat; voice?: string; speed: number };
  };
  truncation: Truncation;
  include: Array<'item.input_audio_transcription.logprobs'>;
  prompt: PromptReference | null;
  tracing: TracingSetting | null;
  /** Unix seconds; 0: a Troupe session does not expire. */
  expires_at: number;
  troupe: {
    character: SessionCharacterInfo;
    /** Whether the character's greeting opens the conversation (`?greeting=0` or `session.troupe.greeting`). */
    greeting: boolean;
    /** What the prompt generator gets as `ctx.metadata` (`?metadata=` or `session.troupe.metadata`). */
    metadata: Record<string, unknown>;
    /** Why the voice asked for is not the one speaking (it fell back), when so. */
    voice_warning?: string;
  };
}

/** GA settings a session takes and shows back, which Troupe's engines decide for themselves. */
export interface GaSessionSettings {
  transcription: TranscriptionSettings | null;
  noiseReduction: NoiseReduction | null;
  speed: number;
  truncation: Truncation;
  include: Array<'item.input_audio_transcription.logprobs'>;
  prompt: PromptReference | null;
  tracing: TracingSetting | null;
}

/** The error payload of an `error` event. */
export interface ErrorPayload {
  type: 'invalid_request_error' | 'server_error' | 'llm_error';
  code: string;
  message: string;
  param: string | null;
  event_id: string | null;
}

interface InResponse {
  response_id: string;
  item_id: string;
  output_index: number;
}

/** Every event a session sends (GA names, no `event_id` yet). */
export type ServerEvent =
  | { type: 'session.created' | 'session.updated'; session: SessionObject }
  | {
      type: 'conversation.item.added' | 'conversation.item.done';
      previous_item_id: string | null;
      item: Item;
    }
  | { type: 'conversation.item.retrieved'; item: Item }
  | { type: 'conversation.item.deleted'; item_id: string }
  | { type: 'response.created' | 'response.done'; response: ResponseObject }
  | {
      type: 'response.output_item.added' | 'response.output_item.done';
      response_id: string;
      output_index: number;
      item: Item;
    }
  | ({
      type: 'response.content_part.added' | 'response.content_part.done';
      content_index: number;
      part: ContentPart;
    } & InResponse)
  | ({ type: 'response.output_text.delta'; content_index: number; delta: string } & InResponse)
  | ({ type: 'response.output_text.done'; content_index: number; text: string } & InResponse)
  | ({
      type: 'response.function_call_arguments.delta';
      call_id: string;
      delta: string;
    } & InResponse)
  | ({
      type: 'response.function_call_arguments.done';
      call_id: string;
      name: string;
      arguments: string;
    } & InResponse)
  // GA's events of a tool the server runs (`mcp_call` items).
  | ({ type: 'response.mcp_call_arguments.delta'; delta: string } & InResponse)
  | ({ type: 'response.mcp_call_arguments.done'; arguments: string } & InResponse)
  | {
      type:
        | 'response.mcp_call.in_progress'
        | 'response.mcp_call.completed'
        | 'response.mcp_call.failed';
      item_id: string;
      output_index: number;
    }
  | ({
      type: 'troupe.tool_call.result';
      call_id: string;
      name: string;
      outcome: ToolOutcome;
      output: string;
      duration_ms: number;
      /** `started`: a background call began; `output` is what the model was told. */
      background?: 'started';
    } & InResponse)
  | {
      /** A background tool reported progress (`ctx.progress(text)`). */
      type: 'troupe.background_tool.progress';
      call_id: string;
      name: string;
      text: string;
    }
  | {
      /**
       * A background call ended: its one outcome; `item_id` is the `mcp_call`
       * item carrying it, null when its conversation was replaced
       * (`session.update {character}`) and it joins no history.
       */
      type: 'troupe.background_tool.done';
      call_id: string;
      name: string;
      item_id: string | null;
      outcome: ToolOutcome;
      output: string;
      duration_ms: number;
    }
  | {
      /** The LLM has sent nothing for `silent_ms` (LLM_SLOW_NOTICE_MS): the reply is late, not lost. */
      type: 'troupe.response.llm_slow';
      response_id: string;
      round: number;
      silent_ms: number;
    }
  | {
      /**
       * The oldest exchanges were let go to keep history within
       * `CONTEXT_TOKENS` (`context_tokens`): these items are gone from the
       * server's conversation (retrieve, previous_item_id and resume no longer
       * know them); the client may keep showing them.
       */
      type: 'troupe.conversation.trimmed';
      item_ids: string[];
      context_tokens: number;
    }
  | { type: 'error'; error: ErrorPayload }
  // ── voice ──
  | { type: 'input_audio_buffer.speech_started'; audio_start_ms: number; item_id: string }
  | { type: 'input_audio_buffer.speech_stopped'; audio_end_ms: number; item_id: string }
  | { type: 'input_audio_buffer.committed'; previous_item_id: string | null; item_id: string }
  | { type: 'input_audio_buffer.cleared' }
  /** `idle_timeout_ms` passed after a response with no speech from the user. */
  | {
      type: 'input_audio_buffer.timeout_triggered';
      audio_start_ms: number;
      audio_end_ms: number;
      item_id: string;
    }
  | {
      type: 'conversation.item.input_audio_transcription.delta';
      item_id: string;
      content_index: number;
      delta: string;
      /** Seconds into the session's input audio where this text starts (Unmute shows it). */
      start_time?: number;
    }
  | {
      type: 'conversation.item.input_audio_transcription.completed';
      item_id: string;
      content_index: number;
      transcript: string;
      /** What was transcribed: seconds of the user's audio, as OpenAI bills a transcription by duration. */
      usage: { type: 'duration'; seconds: number };
    }
  | {
      type: 'conversation.item.input_audio_transcription.failed';
      item_id: string;
      content_index: number;
      error: { type: string; code: string; message: string };
    }
  | {
      type: 'conversation.item.truncated';
      item_id: string;
      content_index: number;
      audio_end_ms: number;
    }
  /** Audio in the session's output format, base64 (PCM16 24 kHz or Ogg/Opus pages). */
  | ({ type: 'response.output_audio.delta'; content_index: number; delta: string } & InResponse)
  | ({ type: 'response.output_audio.done'; content_index: number } & InResponse)
  | ({
      type: 'response.output_audio_transcript.delta';
      content_index: number;
      delta: string;
    } & InResponse)
  | ({
      type: 'response.output_audio_transcript.done';
      content_index: number;
      transcript: string;
    } & InResponse)
  // ── Unmute's own events: only the unmute dialect sends them ──
  /** Reply text as the LLM gives it, before it is spoken. */
  | { type: 'unmute.response.text.delta.ready'; delta: string }
  /** The user's speech interrupted the character. */
  | { type: 'unmute.interrupted_by_vad' }
  /** The conversation so far, after each response (Unmute's frontend shows it in dev mode). */
  | {
      type: 'unmute.additional_outputs';
      args: { chat_history: Array<{ role: string; content: string }>; debug_dict?: object };
    };

/** The type of every server event. */
export type ServerEventType = ServerEvent['type'];
