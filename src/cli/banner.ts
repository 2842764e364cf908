/**
 * What `npm start` says on a terminal once it listens: where, which
 * characters, which LLM and model, and whether that LLM answers — so an
 * unreachable LLM is seen at start, not at the first turn.
 */
import { shownPath } from '../characters/load.js';
import type { TroupeServer } from '../server/index.js';
import type { LlmHealth } from '../server/llm.js';

/** What the banner shows about the LLM: its health and the model a turn would use. */
export interface LlmStatus {
  health: LlmHealth;
  /** The model turns use; `null` when it is not known yet (the LLM did not answer). */
  model: string | null;
  /** Why the model could not be picked (no LLM_MODEL and not exactly one listed). */
  modelError?: string;
}

/**
 * Asks the LLM for its models once (the same probe as `/health`) and picks
 * the model the way the first turn would. Never throws.
 */
export async function checkLlm(server: TroupeServer): Promise<LlmStatus> {
  const health = await server.llm.health();
  if (!health.ok) return { health, model: health.model };
  try {
    const client = await server.llm.get();
    return { health, model: client.model };
  } catch (err) {
    return { health, model: null, modelError: (err as Error).message };
  }
}

/** The banner's lines. */
export function startupBanner(server: TroupeServer, llm: LlmStatus, color = false): string {
  const bold = (s: string) => (color ? `\x1b[1m${s}\x1b[0m` : s);
  const red = (s: string) => (color ? `\x1b[31m${s}\x1b[0m` : s);
  const green = (s: string) => (color ? `\x1b[32m${s}\x1b[0m` : s);
  const ids = server.registry.list().map((c) => c.id);
  const errors = server.registry.errors().length;
  const { health } = llm;
  const llmLine = health.ok
    ? `${health.base_url} · model ${llm.model ?? '?'} · ${green(`answers (${health.latency_ms} ms)`)}`
    : `${health.base_url} · ${red(`does not answer: ${health.error ?? 'unknown error'}`)}`;
  const lines = [
    `${bold('Troupe')} is listening`,
    '',
    `  web client   ${bold(`${server.url}/`)}`,
    `  realtime     ${server.wsUrl}`,
    `  characters   ${ids.length} in ${shownPath(server.registry.dir)}${ids.length ? `: ${ids.join(', ')}` : ''}` +
      (errors ? red(` (${errors} error${errors === 1 ? '' : 's'}, see the log)`) : ''),
    `  LLM          ${llmLine}`,
  ];
  if (!health.ok) {
    lines.push(
      '               turns fail until it answers; set LLM_BASE_URL (and LLM_API_KEY) or start it',
    );
  } else if (llm.modelError) {
    lines.push(`               ${red(llm.modelError)}`);
  }
  lines.push(`  health       ${server.url}/health · metrics ${server.url}/metrics`, '');
  return lines.join('\n');
}
