/** What the report's renderers share: metric titles and number formats. */
import type { PhaseMetrics } from './model.js';

/** Shown for a missing value. */
export const DASH = '—';

/** The metrics in the order shown, with the titles readers see. */
export const METRICS: ReadonlyArray<{ key: keyof PhaseMetrics; title: string; what: string }> = [
  {
    key: 'ttft',
    title: 'Time to first token',
    what: 'turn start → first text (or transcript) delta',
  },
  {
    key: 'firstAudio',
    title: 'Time to first audio',
    what: 'end of the user’s speech → first audio delta',
  },
  { key: 'turnDuration', title: 'Turn duration', what: 'turn start → response.done' },
  {
    key: 'toolRoundOverhead',
    title: 'Tool round overhead',
    what: 'stream end of a tool round → request of the next, handler time excluded (server-measured)',
  },
  {
    key: 'addedPerDelta',
    title: 'Added latency per delta',
    what: 'text delta received − its send time stamped by the simulator',
  },
  {
    key: 'ttftExModel',
    title: 'TTFT without the model’s tool-round time',
    what: 'TTFT with the model’s own time in tool rounds taken out',
  },
  {
    key: 'ttftExModelToolTurns',
    title: 'the same, turns with a tool round',
    what: 'TTFT less the model’s own time in tool rounds, turns that called a tool first',
  },
  {
    key: 'ttftExModelOtherTurns',
    title: 'the same, turns without one',
    what: 'TTFT of the turns that called no tool',
  },
  {
    key: 'ttftTroupe',
    title: 'Troupe’s part of the TTFT',
    what: 'TTFT without the model’s time: its tool rounds and its time to first token (server-measured)',
  },
];

export function isNum(value: number | null | undefined): value is number {
  return typeof value === 'number' && Number.isFinite(value);
}

export function fixed(value: number, digits: number): string {
  return value.toLocaleString('en-US', {
    minimumFractionDigits: digits,
    maximumFractionDigits: digits,
  });
}

/** Milliseconds with precision that fits the size: 0.123, 12.34, 123.4, 1,234; "—" when missing. */
export function formatMs(value: number | null | undefined): string {
  if (!isNum(value)) return DASH;
  const size = Math.abs(value);
  return fixed(value, size < 1 ? 3 : size < 100 ? 2 : size < 1000 ? 1 : 0);
}

/** Escapes text for HTML element content and quoted attribute values. */
export function escapeHtml(text: string): string {
  return String(text)
    .replaceAll('&', '&amp;')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;')
    .replaceAll('"', '&quot;')
    .replaceAll("'", '&#39;');
}

/** A whole number, or {@link DASH} when there is none. */
export function formatInt(value: number | null | undefined): string {
  return isNum(value) ? fixed(value, 0) : DASH;
}
