/** Tool rounds one turn may run before the model must answer without tools. */
export const DEFAULT_MAX_TOOL_ROUNDS = 10;
/** Said when the model still calls tools after its last allowed round. */
export const DEFAULT_ROUND_LIMIT_FALLBACK =
  "I'm sorry, I couldn't finish that. Could you try asking in a different way?";
/** Told to a prompt-mode model on its last request of a turn. */
export const PROMPT_MODE_FINAL_NOTE =
  'You have used all the tool calls allowed for this turn. Answer the user now with what you have; do not write TOOL_CALL lines.';
/** Silence of the LLM after which a turn reports `llm.slow` (and again each time as long). */
export const DEFAULT_SLOW_NOTICE_MS = 5_000;
