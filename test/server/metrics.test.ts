import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { metricValue, parseMetrics, scrape } from '../helpers/http.js';
import { connect, say } from '../helpers/realtime-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

describe('metrics after real sessions', () => {
  let t: TestServer;

  beforeAll(async () => {
    t = await startTestServer();
  });
  afterAll(() => t?.close());

  it('counts a weather tool turn under Troupe and Unmute names, with turn and TTFT metrics', async () => {
    const c = await connect(`${t.wsUrl}?character=weather`);
    await c.next('session.created');
    expect(metricValue(await scrape(t.url), 'troupe_sessions_active')).toBe(1);

    say(c, 'Celsius, please.');
    const result = await c.next('troupe.tool_call.result');
    expect(result).toMatchObject({ name: 'get_current_weather', outcome: 'ok' });
    expect((await c.next('response.done')).response).toMatchObject({ status: 'completed' });

    const text = await scrape(t.url);
    expect(text).toContain(
      'troupe_tool_calls_total{character="weather",tool="get_current_weather",variant="default",outcome="ok",mode="inline"} 1',
    );
    expect(text).toContain(
      'character_tool_calls_total{character_name="Weather",tool_name="get_current_weather"} 1',
    );
    expect(
      metricValue(text, 'troupe_turns_total', { character: 'weather', status: 'completed' }),
    ).toBe(1);
    expect(metricValue(text, 'troupe_turn_ttft_seconds_count', { character: 'weather' })).toBe(1);
    expect(metricValue(text, 'troupe_llm_ttft_seconds_count', { character: 'weather' })).toBe(1);
    expect(metricValue(text, 'troupe_turn_tool_rounds_count', { character: 'weather' })).toBe(1);
    expect(
      metricValue(text, 'troupe_llm_tokens_total', { character: 'weather', kind: 'completion' }),
    ).toBeGreaterThan(0);
    expect(metricValue(text, 'troupe_sessions_total', { character: 'weather' })).toBe(1);
    expect(metricValue(text, 'character_tool_errors_total')).toBe(0);

    // The Unmute fork's buckets, so its dashboards keep working.
    const buckets = parseMetrics(text)
      .filter(
        (s) =>
          s.name === 'character_tool_latency_seconds_bucket' &&
          s.labels.tool_name === 'get_current_weather',
      )
      .map((s) => s.labels.le);
    expect(buckets).toEqual(['0.001', '0.005', '0.01', '0.025', '0.05', '0.1', '0.25', '+Inf']);
    expect(
      metricValue(text, 'character_tool_latency_seconds_count', {
        tool_name: 'get_current_weather',
      }),
    ).toBe(1);

    await c.close();
    await t.waitForLog('session closed');
    const after = await scrape(t.url);
    expect(metricValue(after, 'troupe_sessions_active')).toBe(0);
    expect(metricValue(after, 'troupe_session_duration_seconds_count')).toBe(1);
  });

  it('counts protocol errors by code', async () => {
    const c = await connect(`${t.wsUrl}?character=plain`);
    await c.next('session.created');
    c.send({ type: 'no.such.event' });
    expect((await c.next('error')).error).toMatchObject({ code: 'unknown_event_type' });
    c.send('{not json');
    expect((await c.next('error')).error).toMatchObject({ code: 'invalid_json' });
    c.send({ type: 'response.cancel' });
    expect((await c.next('error')).error).toMatchObject({ code: 'response_cancel_not_active' });

    const text = await scrape(t.url);
    for (const code of ['unknown_event_type', 'invalid_json', 'response_cancel_not_active']) {
      expect(metricValue(text, 'troupe_protocol_errors_total', { code }), code).toBe(1);
    }
    await c.close();
  });

  it('labels tool metrics with the variant a client asked for', async () => {
    const c = await connect(`${t.wsUrl}?character=hello&variant=b`);
    const created = await c.next('session.created');
    expect(created.session).toMatchObject({ troupe: { character: { variant: 'b' } } });
    say(c, 'Say hello to Ada.');
    const result = await c.next('troupe.tool_call.result');
    expect(result.output).toContain('So glad');
    await c.next('response.done');

    const text = await scrape(t.url);
    expect(
      metricValue(text, 'troupe_tool_calls_total', {
        character: 'hello',
        tool: 'sayHello',
        variant: 'b',
        outcome: 'ok',
      }),
    ).toBe(1);
    expect(
      metricValue(text, 'troupe_tool_latency_seconds_count', {
        character: 'hello',
        tool: 'sayHello',
        variant: 'b',
      }),
    ).toBe(1);
    await c.close();
  });
});
