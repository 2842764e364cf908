import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import type { CharacterChange } from '../../src/characters/registry.js';
import type { CharacterSummary, LoadedCharacter } from '../../src/characters/types.js';
import {
  countFromZero,
  createMetrics,
  REJECT_REASONS,
  RESUME_OUTCOMES,
} from '../../src/metrics/index.js';
import { CHARACTER_ERROR_KINDS } from '../../src/errors.js';
import { MAX_BACKGROUND_TOOL_TIMEOUT_MS } from '../../src/tools/constants.js';
import { metricValue } from '../helpers/http.js';

describe('metrics', () => {
  it('keeps tool latencies apart by outcome, so timeouts do not mix with successes', async () => {
    const metrics = createMetrics();
    const labels = { character: 'c', tool: 't', variant: 'default' };
    metrics.sessions.toolLatency.observe({ ...labels, outcome: 'ok' }, 0.01);
    metrics.sessions.toolLatency.observe({ ...labels, outcome: 'timeout' }, 0.1);
    const text = await metrics.registry.metrics();
    expect(text).toMatch(/troupe_tool_latency_seconds_count\{[^}]*outcome="ok"[^}]*\} 1/);
    expect(text).toMatch(/troupe_tool_latency_seconds_count\{[^}]*outcome="timeout"[^}]*\} 1/);
  });
});

describe('series that exist before their first count', () => {
  it('starts every refusal reason and resume outcome at 0', async () => {
    const text = await createMetrics().registry.metrics();
    for (const reason of REJECT_REASONS) {
      expect(metricValue(text, 'troupe_connections_rejected_total', { reason })).toBe(0);
    }
    for (const outcome of RESUME_OUTCOMES) {
      expect(metricValue(text, 'troupe_resume_attempts_total', { outcome })).toBe(0);
    }
  });

  it("starts each character's sessions and turns at 0 as it loads, and one added later", async () => {
    const metrics = createMetrics({ processMetrics: false });
    let listener: ((change: CharacterChange) => void) | undefined;
    countFromZero(metrics.sessions, {
      list: () => [{ id: 'a' }] as CharacterSummary[],
      subscribe: (l) => {
        listener = l;
        return () => undefined;
      },
    });
    listener!({ type: 'added', id: 'b', character: {} as LoadedCharacter });
    const text = await metrics.registry.metrics();
    for (const character of ['a', 'b']) {
      expect(metricValue(text, 'troupe_sessions_total', { character })).toBe(0);
      for (const status of ['completed', 'cancelled', 'failed', 'incomplete']) {
        expect(metricValue(text, 'troupe_turns_total', { character, status })).toBe(0);
      }
    }
  });

  it('measures tool calls up to a background call’s longest timeout', async () => {
    const metrics = createMetrics({ processMetrics: false });
    metrics.sessions.toolLatency.observe(
      { character: 'c', tool: 't', variant: 'default', outcome: 'ok' },
      MAX_BACKGROUND_TOOL_TIMEOUT_MS / 1000,
    );
    const after = await metrics.registry.metrics();
    expect(after).toMatch(/troupe_tool_latency_seconds_bucket\{le="600",[^}]*\} 1/);
  });
});

describe('the character load-error metric', () => {
  it('has a type for every kind of character error, each listed in both character docs', async () => {
    const text = await createMetrics().registry.metrics();
    for (const type of CHARACTER_ERROR_KINDS) {
      expect(metricValue(text, 'troupe_character_load_errors_total', { type }), type).toBe(0);
    }
    const characters = await readFile('docs/characters.md', 'utf8');
    const listed = /troupe_character_load_errors_total\{type\}` \(types: ([^)]*)\)/.exec(
      characters.replace(/\s+/g, ' '),
    );
    const types = new Set([...(listed?.[1] ?? '').matchAll(/`(\w+)`/g)].map((m) => m[1]));
    expect([...types].sort()).toEqual([...CHARACTER_ERROR_KINDS].sort());
    const writing = await readFile('docs/writing-characters.md', 'utf8');
    const rows = [...writing.matchAll(/^\| `(\w+)` +\| /gm)].map((m) => m[1]);
    for (const type of CHARACTER_ERROR_KINDS) expect(rows, type).toContain(type);
  });
});

describe('process metrics', () => {
  it("count the process's CPU from its start, not from when the registry was made", async () => {
    const spent = process.cpuUsage();
    const text = await createMetrics().registry.metrics();
    expect(metricValue(text, 'troupe_process_cpu_seconds_total')).toBeGreaterThanOrEqual(
      (spent.user + spent.system) / 1e6,
    );
    expect(text).not.toMatch(/^# TYPE \S+_total gauge$/m);
  });
});
