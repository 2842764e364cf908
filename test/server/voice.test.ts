import { Registry } from 'prom-client';
import { afterAll, describe, expect, it } from 'vitest';
import { registerSttCapacity, warmEngines } from '../../src/server/voice.js';
import { createMemoryLogger } from '../../src/testing/memory-logger.js';
import { PocketsphinxSttProvider } from '../../src/voice/stt/pocketsphinx.js';

describe('registerSttCapacity', () => {
  const stt = new PocketsphinxSttProvider({ maxWorkers: 1 });
  afterAll(() => stt.close());

  it('publishes the STT real-time factor, backlog, waiting speakers and saturation', async () => {
    const registry = new Registry();
    registerSttCapacity(registry, stt);
    const text = await registry.metrics();
    for (const name of [
      'troupe_stt_real_time_factor',
      'troupe_stt_backlog_seconds',
      'troupe_stt_streams_waiting',
      'troupe_stt_workers',
    ]) {
      expect(text).toMatch(new RegExp(`^${name}\\{provider="pocketsphinx"\\} 0$`, 'm'));
    }
    expect(text).toMatch(/^troupe_stt_saturated\{provider="pocketsphinx"\} 0$/m);
  });
});

describe('warmEngines', () => {
  /** An engine whose warm-up ends when told, or fails when its signal stops it. */
  const engine = (name: string, fails?: string) => ({
    name,
    warm: (signal?: AbortSignal) =>
      new Promise<void>((resolve, reject) => {
        if (fails !== undefined) return reject(new Error(fails));
        signal?.addEventListener('abort', () => reject(new Error('This operation was aborted')));
        if (name === 'quick') resolve();
      }),
  });

  it('warns of a warm-up that failed and logs one that ended', async () => {
    const log = createMemoryLogger();
    await warmEngines(
      [engine('quick'), engine('broken', 'model missing'), null],
      new AbortController().signal,
      log,
    );
    const seen = log.entries.map((e) => [e.level, e.msg, e.fields.provider]);
    expect(seen).toContainEqual(['info', 'speech engine warm', 'quick']);
    expect(seen).toContainEqual(['warn', 'speech engine warm-up failed', 'broken']);
  });

  it('does not call a warm-up stopped by the server closing a failure', async () => {
    const log = createMemoryLogger();
    const closing = new AbortController();
    const warmed = warmEngines([engine('slow'), engine('slower')], closing.signal, log);
    closing.abort();
    await warmed;
    expect(log.entries.filter((e) => e.level === 'warn')).toEqual([]);
    expect(log.entries.map((e) => [e.level, e.msg])).toEqual([
      ['debug', 'speech engine warm-up stopped'],
      ['debug', 'speech engine warm-up stopped'],
    ]);
  });
});
