import { Registry } from 'prom-client';
import { afterAll, describe, expect, it } from 'vitest';
import { registerSttCapacity } from '../../src/server/voice.js';
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
