import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../../src/errors.js';
import { createMemoryLogger } from '../../../src/testing/memory-logger.js';
import { startFakeKyutaiStt, startFakeOpenAiStt } from '../../../src/testing/fake-stt.js';
import {
  DEFAULT_OPENAI_STT_MODEL,
  KyutaiSttProvider,
  OpenAiSttProvider,
  PocketsphinxSttProvider,
  createSttProvider,
} from '../../../src/voice/stt/index.js';
import type { SttConfig } from '../../../src/voice/stt/index.js';

describe('createSttProvider', () => {
  it('gives null for none: a text-only server', () => {
    expect(createSttProvider({ provider: 'none' })).toBeNull();
  });

  it('makes the offline pocketsphinx engine without loading anything yet', async () => {
    const stt = createSttProvider({ provider: 'pocketsphinx' });
    expect(stt).toBeInstanceOf(PocketsphinxSttProvider);
    expect(stt).toMatchObject({
      name: 'pocketsphinx',
      sampleRate: 16_000,
      continuous: false,
      reportsPauses: false,
    });
    expect((stt as PocketsphinxSttProvider).stats()).toMatchObject({ workers: 0, decoders: 0 });
    await stt!.close();
  });

  it('points the openai engine at the configured base URL, model and key, whisper-1 by default', async () => {
    expect(DEFAULT_OPENAI_STT_MODEL).toBe('whisper-1');
    const fake = await startFakeOpenAiStt({ apiKey: 'k', transcripts: ['hi'] });
    try {
      const log = createMemoryLogger();
      const stt = createSttProvider(
        { provider: 'openai', baseURL: fake.url, apiKey: 'k', language: 'fr' },
        { log },
      );
      expect(stt).toBeInstanceOf(OpenAiSttProvider);
      const stream = stt!.open({ signal: new AbortController().signal, onEvent: () => {} });
      stream.write(new Int16Array(1600));
      await expect(stream.commit()).resolves.toBe('hi');
      expect(fake.requests[0]).toMatchObject({
        model: 'whisper-1',
        language: 'fr',
        authorization: 'Bearer k',
      });
      expect(log.entries.some((e) => e.msg === 'openai transcription done')).toBe(true);
    } finally {
      await fake.close();
    }
  });

  it('points the kyutai engine at the configured URL and key', async () => {
    const fake = await startFakeKyutaiStt({ apiKey: 'secret' });
    try {
      const stt = createSttProvider({ provider: 'kyutai', baseURL: fake.url, apiKey: 'secret' });
      expect(stt).toBeInstanceOf(KyutaiSttProvider);
      expect(stt).toMatchObject({ sampleRate: 24_000, continuous: true, reportsPauses: true });
      await expect(stt!.health()).resolves.toMatchObject({ ok: true });
      const stream = stt!.open({ signal: new AbortController().signal, onEvent: () => {} });
      stream.write(new Int16Array(24_000).fill(4000));
      await expect(stream.commit()).resolves.toBe('hello world');
      expect(fake.received.apiKeys).toEqual(['secret']);
      await stt!.close();
    } finally {
      await fake.close();
    }
  });

  it('throws a ConfigError naming the choices for an unknown provider', () => {
    expect(() => createSttProvider({ provider: 'whisper' } as unknown as SttConfig)).toThrow(
      ConfigError,
    );
    expect(() => createSttProvider({ provider: 'whisper' } as unknown as SttConfig)).toThrow(
      /unknown STT provider "whisper"; use pocketsphinx, openai, kyutai or none/,
    );
  });
});
