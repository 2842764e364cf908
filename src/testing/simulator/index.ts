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
export {
  PROFILES,
  PROFILE_NAMES,
  createRng,
  corruptArguments,
  isProfileName,
  planReply,
  renderMessage,
  renderStream,
  splitFragments,
  splitText,
  toolModeOf,
} from './profiles.js';
export type {
  PlanStep,
  PlannedCall,
  ProfileInfo,
  ProfileName,
  ReplyPlan,
  Rng,
  StreamFrame,
  ToolMode,
} from './profiles.js';
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
