/**
 * Every Prometheus metric Troupe exports, on one prom-client registry per
 * server. Names are `troupe_<area>_<thing>_<unit>`; labels stay low-cardinality.
 */
import {
  Counter,
  Gauge,
  Histogram,
  Registry,
  collectDefaultMetrics,
  type Aggregator,
} from 'prom-client';
import { CHARACTER_ERROR_KINDS } from '../errors.js';
import type { CharacterMetrics, CharacterRegistry } from '../characters/registry.js';
import type { TurnSummary } from '../llm/turn-runner.js';
import type { McpMetrics } from '../mcp/metrics.js';
import { TOOL_OUTCOMES } from '../tools/types.js';

/** Latency buckets (seconds) for time to first token and turn phases. */
const LATENCY_BUCKETS_S = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
/** Tool handler buckets (seconds); the Unmute fork's, for existing dashboards. */
const TOOL_BUCKETS_S = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25];
/** Troupe's own tool buckets: the Unmute fork's, then on to a background call's longest timeout (600 s). */
const ALL_TOOL_BUCKETS_S = [...TOOL_BUCKETS_S, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];

/**
 * Why the server refuses or closes a connection:
 * `troupe_connections_rejected_total`'s reasons, each counted from 0.
 */
export const REJECT_REASONS = [
  'auth',
  'origin',
  'full',
  'overloaded',
  'shutting_down',
  'invalid_dialect',
  'no_characters',
  'unknown_character',
  'unknown_variant',
  'character_unavailable',
  'resumed_elsewhere',
  'frame_too_large',
  'frame_flood',
  'handshake_timeout',
  'headers_too_large',
  'bad_request',
  'invalid_events',
  'ping_flood',
  'slow_consumer',
  'idle',
  'expired',
  'dead_peer',
] as const;

/** One of {@link REJECT_REASONS}. */
export type RejectReason = (typeof REJECT_REASONS)[number];

/** `troupe_resume_attempts_total`'s outcomes, each counted from 0. */
export const RESUME_OUTCOMES = [
  'resumed',
  'not_found',
  'invalid_token',
  'auth_mismatch',
  'store_unavailable',
  'incomplete',
  'restore_failed',
] as const;

/** How a response ends, as `troupe_turns_total` counts it: every status a turn ends with. */
const TURN_STATUSES = [
  'completed',
  'cancelled',
  'failed',
  'incomplete',
] as const satisfies ReadonlyArray<TurnSummary['status']>;
/** A turn's status missing from the list above fails the type check here. */
const EVERY_TURN_STATUS: Exclude<
  TurnSummary['status'],
  (typeof TURN_STATUSES)[number]
> extends never
  ? true
  : never = true;
void EVERY_TURN_STATUS;

/** Session, turn and tool metrics, as a session records them. */
export interface SessionMetrics {
  active: Gauge;
  total: Counter<'character'>;
  /** Transfers from one character to another (`transfer_to_<id>`). */
  handoffs?: Counter<'from' | 'to'>;
  /**
   * Background calls a resumed session found gone (they ran in a process
   * that stopped, or ended where no session could take their outcome): each
   * ends in history as interrupted. Counted where the resume happens.
   */
  backgroundInterrupted?: Counter<'character' | 'tool'>;
  duration: Histogram;
  turns: Counter<'character' | 'status'>;
  /** `response.create` received → first text delta sent. */
  ttft: Histogram<'character'>;
  /** LLM request sent → its first token (the first chunk with output). */
  llmTtft: Histogram<'character'>;
  tokens: Counter<'character' | 'kind'>;
  toolCalls: Counter<'character' | 'tool' | 'variant' | 'outcome' | 'mode'>;
  /** Labelled by `outcome` too, so timeouts and errors do not mix with successes. */
  toolLatency: Histogram<'character' | 'tool' | 'variant' | 'outcome'>;
  toolRounds: Histogram<'character'>;
  voice: VoiceMetrics;
  /** The Unmute fork's names. */
  unmute: {
    toolCalls: Counter<'character_name' | 'tool_name'>;
    toolErrors: Counter<'error_type'>;
    toolLatency: Histogram<'tool_name'>;
  };
}

/** Speech metrics, per provider. */
export interface VoiceMetrics {
  /** End of the user's speech → transcript ready. */
  sttLatency: Histogram<'provider'>;
  /** First text of a spoken item given to the engine → its first audio. */
  ttsFirstAudio: Histogram<'provider'>;
  /** End of the user's speech (or response.create) → first audio byte sent. */
  speechToAudio: Histogram<'stt' | 'tts'>;
  /** Responses interrupted by the user's speech. */
  bargeIns: Counter<'character'>;
  /** Utterances speech-to-text found no words in (dropped from the conversation), by provider. */
  wordless: Counter<'provider'>;
  /** Audio seconds received (`in`, by STT provider) and sent (`out`, by TTS provider). */
  audioSeconds: Counter<'direction' | 'provider'>;
  /** Speech failures: unreadable input audio, STT or TTS errors. */
  errors: Counter<'kind' | 'provider'>;
}

/** Connection and protocol metrics, as the server records them. */
export interface ServerMetrics {
  protocolErrors: Counter<'code'>;
  rejected: Counter<'reason'>;
}

/** Resume and overload metrics. */
export interface ScaleMetrics {
  /** Resume store failures, by operation (save, claim, connection). */
  storeErrors: Counter<'op'>;
  /** `?resume=` attempts, by outcome (resumed, not_found, invalid_token, auth_mismatch, store_unavailable, incomplete, restore_failed). */
  attempts: Counter<'outcome'>;
  /** One write to the resume store. */
  saveSeconds: Histogram;
  /** The event loop's mean lag over the last second (its longest sample left out), as the overload check sees it. */
  eventLoopLag: Gauge;
  /** Records the in-memory store let go for room (`RESUME_MEMORY_MB`) before their TTL. */
  storeEvictions: Counter;
  /** Server tool calls a resumed conversation brought back as interrupted (their process stopped while they ran), by tool. */
  toolsInterrupted: Counter<'tool'>;
}

/** Options of {@link createMetrics}. */
export interface MetricsOptions {
  /** Also export Node's process metrics (CPU, memory, event loop lag). @defaultValue true */
  processMetrics?: boolean;
}

/** The registry and every metric on it. */
export interface Metrics {
  readonly registry: Registry;
  readonly characters: CharacterMetrics;
  readonly sessions: SessionMetrics;
  readonly server: ServerMetrics;
  readonly scale: ScaleMetrics;
}

/**
 * Creates a registry with every Troupe metric.
 *
 * @example
 * const metrics = createMetrics();
 * await loadCharacters({ dir: 'characters', metrics: metrics.characters });
 * res.end(await metrics.registry.metrics());
 */
export function createMetrics(options: MetricsOptions = {}): Metrics {
  const registry = new Registry();
  if (options.processMetrics ?? true) processMetrics(registry);
  const registers = [registry];
  // In this order: /metrics lists them as they were registered.
  const characters = createCharacterMetrics(registers);
  const sessions = createSessionMetrics(registers);
  const server = createServerMetrics(registers);
  const scale = createScaleMetrics(registers);
  const mcp = createMcpMetrics(registers);
  return { registry, characters: { ...characters, mcp }, sessions, server, scale };
}

/**
 * prom-client's gauges that carry a `_total` suffix, which Prometheus keeps
 * for counters (`promtool check metrics` rejects them): the same sums are
 * `troupe_nodejs_active_handles` and the others, by type.
 */
const TOTAL_GAUGES = [
  'troupe_nodejs_active_handles_total',
  'troupe_nodejs_active_requests_total',
  'troupe_nodejs_active_resources_total',
];

/**
 * How a process metric is summed over an instance's processes, where
 * prom-client's own choice does not fit: the instance started with its
 * first process (prom-client leaves it out), and a descriptor limit is
 * each process's, not a sum.
 */
const PROCESS_AGGREGATORS: Record<string, Aggregator> = {
  troupe_process_start_time_seconds: 'min',
  troupe_process_max_fds: 'min',
};

/**
 * Node's process metrics (CPU, memory, event loop, GC) on a registry, as
 * `troupe_process_*` and `troupe_nodejs_*`.
 *
 * @example processMetrics(registry);
 */
export function processMetrics(registry: Registry): void {
  collectDefaultMetrics({ register: registry, prefix: 'troupe_' });
  // prom-client counts CPU from here on; what the process spent before
  // (loading, compiling the TypeScript) is counted once, so the counters
  // run from the process's start, as `ps` shows.
  const spent = process.cpuUsage();
  const cpu = (name: string, micros: number): void =>
    (registry.getSingleMetric(`troupe_process_cpu_${name}`) as Counter | undefined)?.inc(
      micros / 1e6,
    );
  cpu('user_seconds_total', spent.user);
  cpu('system_seconds_total', spent.system);
  cpu('seconds_total', spent.user + spent.system);
  for (const name of TOTAL_GAUGES) registry.removeSingleMetric(name);
  for (const [name, aggregator] of Object.entries(PROCESS_AGGREGATORS)) {
    const metric = registry.getSingleMetric(name) as { aggregator: Aggregator } | undefined;
    if (metric) metric.aggregator = aggregator;
  }
}

/** Character loading and hot reload. */
function createCharacterMetrics(registers: Registry[]): Omit<CharacterMetrics, 'mcp'> {
  const loadErrors = new Counter({
    name: 'troupe_character_load_errors_total',
    help: 'Character files rejected at load or reload, by error type.',
    labelNames: ['type'] as const,
    registers,
  });
  for (const type of CHARACTER_ERROR_KINDS) loadErrors.inc({ type }, 0);
  const reloads = new Counter({
    name: 'troupe_character_reloads_total',
    help: 'Hot reloads of characters, by outcome (ok, failed: old version kept, removed).',
    labelNames: ['outcome'] as const,
    registers,
  });
  const loaded = new Gauge({
    name: 'troupe_characters_loaded',
    help: 'Characters currently available to new sessions (with workers: the fewest any worker has).',
    registers,
    // Every worker loads the same characters: a sum would count each once per worker.
    aggregator: 'min',
  });
  return { loadErrors, reloads, loaded };
}

/** Sessions, turns and tools, with speech and the Unmute fork's tool names. */
function createSessionMetrics(registers: Registry[]): SessionMetrics {
  const sessions: SessionMetrics = {
    active: new Gauge({
      name: 'troupe_sessions_active',
      help: 'Sessions open now.',
      registers,
    }),
    total: new Counter({
      name: 'troupe_sessions_total',
      help: 'Sessions opened, by character.',
      labelNames: ['character'],
      registers,
    }),
    handoffs: new Counter({
      name: 'troupe_handoffs_total',
      help: 'Handoffs between characters in sessions, by the character handing off and the one taking over.',
      labelNames: ['from', 'to'],
      registers,
    }),
    backgroundInterrupted: new Counter({
      name: 'troupe_tool_background_interrupted_total',
      help: 'Background tool calls a resumed session found no longer running (their result was lost with the connection), by character and tool.',
      labelNames: ['character', 'tool'],
      registers,
    }),
    duration: new Histogram({
      name: 'troupe_session_duration_seconds',
      help: 'How long sessions lasted.',
      buckets: [1, 10, 30, 60, 300, 900, 1800, 3600, 7200],
      registers,
    }),
    turns: new Counter({
      name: 'troupe_turns_total',
      help: 'Responses, by character and status (completed, cancelled, incomplete, failed).',
      labelNames: ['character', 'status'],
      registers,
    }),
    ttft: new Histogram({
      name: 'troupe_turn_ttft_seconds',
      help: 'response.create received to first text delta sent.',
      labelNames: ['character'],
      buckets: LATENCY_BUCKETS_S,
      registers,
    }),
    llmTtft: new Histogram({
      name: 'troupe_llm_ttft_seconds',
      help: 'LLM request sent to its first token (the first chunk with text, reasoning or a tool call).',
      labelNames: ['character'],
      buckets: LATENCY_BUCKETS_S,
      registers,
    }),
    tokens: new Counter({
      name: 'troupe_llm_tokens_total',
      help: 'Tokens the LLM reported, by character and kind (prompt, completion).',
      labelNames: ['character', 'kind'],
      registers,
    }),
    toolCalls: new Counter({
      name: 'troupe_tool_calls_total',
      help: 'Tool calls by character, tool, variant, outcome and mode (inline, background, client; client-side tools count as tool="client").',
      labelNames: ['character', 'tool', 'variant', 'outcome', 'mode'],
      registers,
    }),
    toolLatency: new Histogram({
      name: 'troupe_tool_latency_seconds',
      help: 'Tool call duration (validation and handler), by character, tool, variant and outcome.',
      labelNames: ['character', 'tool', 'variant', 'outcome'],
      buckets: ALL_TOOL_BUCKETS_S,
      registers,
    }),
    toolRounds: new Histogram({
      name: 'troupe_turn_tool_rounds',
      help: 'Tool rounds per response.',
      labelNames: ['character'],
      buckets: [0, 1, 2, 3, 5, 10, 20, 50, 100],
      registers,
    }),
    voice: createVoiceMetrics(registers),
    unmute: createUnmuteMetrics(registers),
  };
  for (const outcome of TOOL_OUTCOMES) {
    if (outcome !== 'ok') sessions.unmute.toolErrors.inc({ error_type: outcome }, 0);
  }
  return sessions;
}

/** Connections refused and protocol errors. */
function createServerMetrics(registers: Registry[]): ServerMetrics {
  const server: ServerMetrics = {
    protocolErrors: new Counter({
      name: 'troupe_protocol_errors_total',
      help: 'error events sent to clients, by code.',
      labelNames: ['code'],
      registers,
    }),
    rejected: new Counter({
      name: 'troupe_connections_rejected_total',
      help: `Connections refused or closed by the server, by reason (${REJECT_REASONS.join(', ')}).`,
      labelNames: ['reason'],
      registers,
    }),
  };
  for (const reason of REJECT_REASONS) server.rejected.inc({ reason }, 0);
  return server;
}

/** Speech, per provider. */
function createVoiceMetrics(registers: Registry[]): VoiceMetrics {
  return {
    sttLatency: new Histogram({
      name: 'troupe_stt_latency_seconds',
      help: "End of the user's speech to its transcript, by STT provider.",
      labelNames: ['provider'],
      buckets: LATENCY_BUCKETS_S,
      registers,
    }),
    ttsFirstAudio: new Histogram({
      name: 'troupe_tts_first_audio_seconds',
      help: 'Text given to the TTS engine to its first audio, by TTS provider.',
      labelNames: ['provider'],
      buckets: LATENCY_BUCKETS_S,
      registers,
    }),
    speechToAudio: new Histogram({
      name: 'troupe_voice_response_latency_seconds',
      help: "End of the user's speech (or response.create) to the first audio byte sent, by STT and TTS provider.",
      labelNames: ['stt', 'tts'],
      buckets: LATENCY_BUCKETS_S,
      registers,
    }),
    bargeIns: new Counter({
      name: 'troupe_barge_ins_total',
      help: 'Responses interrupted by the user speaking, by character.',
      labelNames: ['character'],
      registers,
    }),
    wordless: new Counter({
      name: 'troupe_stt_utterances_without_words_total',
      help: 'Utterances speech-to-text found no words in (their items are deleted and not answered), by STT provider.',
      labelNames: ['provider'],
      registers,
    }),
    audioSeconds: new Counter({
      name: 'troupe_audio_seconds_total',
      help: 'Audio received (direction="in", by STT provider) and sent (direction="out", by TTS provider), in seconds.',
      labelNames: ['direction', 'provider'],
      registers,
    }),
    errors: new Counter({
      name: 'troupe_voice_errors_total',
      help: 'Speech failures by kind (input_audio, stt, tts) and provider (or input encoding).',
      labelNames: ['kind', 'provider'],
      registers,
    }),
  };
}

/** The Unmute fork's tool metrics, under its names and buckets (for existing dashboards). */
function createUnmuteMetrics(registers: Registry[]): SessionMetrics['unmute'] {
  return {
    toolCalls: new Counter({
      name: 'character_tool_calls_total',
      help: "Tool calls by character and tool (the Unmute fork's name).",
      labelNames: ['character_name', 'tool_name'],
      registers,
    }),
    toolErrors: new Counter({
      name: 'character_tool_errors_total',
      help: "Tool calls that did not end ok, by outcome (the Unmute fork's name).",
      labelNames: ['error_type'],
      registers,
    }),
    toolLatency: new Histogram({
      name: 'character_tool_latency_seconds',
      help: "Tool call duration by tool (the Unmute fork's name and buckets).",
      labelNames: ['tool_name'],
      buckets: TOOL_BUCKETS_S,
      registers,
    }),
  };
}

/** Call timing buckets (seconds) of MCP tools: a process or network hop, up to the 60 s limit. */
const MCP_CALL_BUCKETS_S = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5, 30, 60];

/** MCP tool servers, labelled by the server's `label` in the character file. */
function createMcpMetrics(registers: Registry[]): McpMetrics {
  return {
    calls: new Counter({
      name: 'troupe_mcp_calls_total',
      help: "MCP tool calls by server label and outcome (ok; error: the server's isError; failed: connection or protocol failure; timeout; cancelled).",
      labelNames: ['server', 'outcome'] as const,
      registers,
    }),
    callSeconds: new Histogram({
      name: 'troupe_mcp_call_duration_seconds',
      help: 'MCP tool call duration (request to answer, or to its end), by server label.',
      labelNames: ['server'] as const,
      buckets: MCP_CALL_BUCKETS_S,
      registers,
    }),
    connected: new Gauge({
      name: 'troupe_mcp_server_connected',
      help: "Whether the MCP server is connected now (1) or not (0), by server label; with workers, the lowest worker's (0 while any one has lost it).",
      labelNames: ['server'] as const,
      aggregator: 'min',
      registers,
    }),
    connects: new Counter({
      name: 'troupe_mcp_connects_total',
      help: 'MCP connection attempts (start or reach the server, handshake), by server label and outcome (ok, failed).',
      labelNames: ['server', 'outcome'] as const,
      registers,
    }),
    reconnects: new Counter({
      name: 'troupe_mcp_reconnects_total',
      help: 'MCP connections made again after the previous one was lost, by server label.',
      labelNames: ['server'] as const,
      registers,
    }),
    disconnects: new Counter({
      name: 'troupe_mcp_disconnects_total',
      help: 'MCP connections lost (an stdio server exited, an HTTP server went away or broke a request), by server label.',
      labelNames: ['server'] as const,
      registers,
    }),
    tools: new Gauge({
      name: 'troupe_mcp_tools',
      help: "Tools characters offer from the MCP server (after allowedTools), by server label, as of the last load; with workers, the lowest worker's.",
      labelNames: ['server'] as const,
      aggregator: 'min',
      registers,
    }),
  };
}

/** Resume and overload metrics. */
function createScaleMetrics(registers: Registry[]): ScaleMetrics {
  const scale: ScaleMetrics = {
    storeErrors: new Counter({
      name: 'troupe_resume_store_errors_total',
      help: 'Resume store failures, by operation (save, claim, connection).',
      labelNames: ['op'],
      registers,
    }),
    toolsInterrupted: new Counter({
      name: 'troupe_resume_tools_interrupted_total',
      help: 'Server tool calls a resumed conversation brought back failed as interrupted: their process stopped while they ran, so whether they did their work is unknown. By tool.',
      labelNames: ['tool'],
      registers,
    }),
    attempts: new Counter({
      name: 'troupe_resume_attempts_total',
      help: `Reconnections with ?resume=, by outcome (${RESUME_OUTCOMES.join(', ')}).`,
      labelNames: ['outcome'],
      registers,
    }),
    saveSeconds: new Histogram({
      name: 'troupe_resume_save_seconds',
      help: 'One write of a conversation to the resume store.',
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
      registers,
    }),
    eventLoopLag: new Gauge({
      name: 'troupe_server_event_loop_lag_seconds',
      help: "The event loop's mean lag over the last second, its longest sample left out, as the overload check sees it (the highest worker's when aggregated).",
      aggregator: 'max',
      registers,
    }),
    storeEvictions: storeEvictionsCounter(registers),
  };
  for (const op of ['save', 'claim', 'connection']) scale.storeErrors.inc({ op }, 0);
  for (const outcome of RESUME_OUTCOMES) scale.attempts.inc({ outcome }, 0);
  return scale;
}

/**
 * `troupe_resume_store_evictions_total`: in each server, and in the primary
 * of an instance with workers, which keeps their shared store.
 */
export function storeEvictionsCounter(registers: Registry[]): Counter {
  return new Counter({
    name: 'troupe_resume_store_evictions_total',
    help: 'Records the in-memory resume store let go before their TTL to stay within RESUME_MEMORY_MB (the oldest written first).',
    registers,
  });
}

/**
 * Starts each character's session and turn counts at 0, as it loads, so
 * a series exists before its first increment (Prometheus' `increase()`
 * counts nothing for a series that is born at 1).
 *
 * @example countFromZero(metrics.sessions, registry);
 */
export function countFromZero(
  sessions: Pick<SessionMetrics, 'total' | 'turns'>,
  characters: Pick<CharacterRegistry, 'list' | 'subscribe'>,
): void {
  const start = (character: string): void => {
    sessions.total.inc({ character }, 0);
    for (const status of TURN_STATUSES) sessions.turns.inc({ character, status }, 0);
  };
  for (const c of characters.list()) start(c.id);
  characters.subscribe((change) => {
    if (change.type === 'added') start(change.id);
  });
}
