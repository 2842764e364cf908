/** Time a tool handler gets before its call ends as `timeout`. */
export const DEFAULT_TOOL_TIMEOUT_MS = 100;
/** Largest tool output, in UTF-8 bytes, sent to the model; longer output is cut with a note. */
export const DEFAULT_MAX_TOOL_OUTPUT_BYTES = 16 * 1024;
/** Tool names the OpenAI API accepts. */
export const TOOL_NAME_PATTERN = /^[a-zA-Z0-9_-]{1,64}$/;
/** Variant name of tools that were not bound from a library. */
export const DEFAULT_VARIANT = 'default';
/** Most tool calls run from one model reply; the rest end as `error` without running. */
export const DEFAULT_MAX_PARALLEL_TOOL_CALLS = 32;
/** Time a background tool's handler gets before its call ends as `timeout`, when it sets none. */
export const DEFAULT_BACKGROUND_TOOL_TIMEOUT_MS = 30_000;
/** Highest `timeoutMs` a background tool may set (10 minutes). */
export const MAX_BACKGROUND_TOOL_TIMEOUT_MS = 600_000;
/** Background calls one session may have running at once; more end as `error` without running. */
export const MAX_BACKGROUND_CALLS_PER_SESSION = 8;
/**
 * What the model reads of a call that was running when its process was
 * stopped outright (a resumed conversation's only trace of it): the handler
 * may or may not have done its work.
 */
export const TOOL_INTERRUPTED_OUTPUT =
  'The server stopped while this tool was running, before it returned a result: it may or may not have done its work. Check before running it again.';
