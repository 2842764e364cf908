/** File extensions the loader imports as characters. */
export const CHARACTER_EXTENSIONS = ['.ts', '.js', '.mjs'] as const;
/** A character id is its file name; ids appear in URLs and metrics labels. */
export const CHARACTER_ID_PATTERN = /^[a-zA-Z0-9][a-zA-Z0-9_-]{0,63}$/;
/** Most tools one character may offer (models degrade well before this). */
export const MAX_CHARACTER_TOOLS = 128;
/** Highest `maxToolRounds` a character may ask for. */
export const MAX_CHARACTER_TOOL_ROUNDS = 100;
/** Highest per-tool `timeoutMs`: a turn must not hang on one tool for longer. */
export const MAX_CHARACTER_TOOL_TIMEOUT_MS = 60_000;
/** Time the prompt generator gets (at load and at session start) before it counts as failed. */
export const SYSTEM_PROMPT_TIMEOUT_MS = 2_000;
/** Quiet time after a file change before it is reloaded (editors write in bursts). */
export const RELOAD_DEBOUNCE_MS = 75;
/** Most characters one character may hand off to (one `transfer_to_<id>` tool each). */
export const MAX_CHARACTER_HANDOFFS = 16;
