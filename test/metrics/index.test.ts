import { describe, expect, it } from 'vitest';
import { createMetrics } from '../../src/metrics/index.js';

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
