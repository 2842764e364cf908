/** The Troupe LLM simulator: an OpenAI-compatible HTTP server for tests, demos and load tests. */
export { startSimulator, DEFAULT_HOST, DEFAULT_MODELS, DEFAULT_PROFILE } from './server.js';
export type {
  RecordedRequest,
  RequestOutcome,
  SimFault,
  SimLatency,
  Simulator,
  SimulatorOptions,
} from './types.js';
export { PROFILES, PROFILE_NAMES, isProfileName } from './profiles.js';
export type { ProfileInfo, ProfileName } from './profiles.js';
export { createRng } from './rng.js';
export type { Rng } from './rng.js';
export {
  corruptArguments,
  planReply,
  splitFragments,
  splitText,
  toolModeOf,
} from './reply-plan.js';
export type { PlanStep, PlannedCall, ReplyPlan, ToolMode } from './reply-plan.js';
export { renderMessage, renderStream } from './render.js';
export type { StreamFrame } from './render.js';
export {
  DEFAULT_FALLBACK_REPLY,
  DEFAULT_FALLBACK_TEXT,
  PROMPT_TOOL_RESULT_PREFIX,
  SIM_SCRIPT_SCHEMA,
  TOOLS_DISABLED_TEXT,
  conversationFacts,
  parseSimScript,
  ruleMatches,
  selectReply,
} from './script.js';
export type {
  ConversationFacts,
  SimPart,
  SimReply,
  SimRule,
  SimScript,
  SimWhen,
} from './script.js';
export { epochNow, readStamps, stampText } from './stamp.js';
export {
  answerFromResults,
  argumentsFor,
  improvise,
  offeredTools,
  summarizeToolResult,
} from './improvise.js';
export type { Improvised, OfferedTool } from './improvise.js';
export { badRequestBody, checkChatRequest } from './history-check.js';
export type { VllmErrorBody } from './history-check.js';
