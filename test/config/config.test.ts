import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { ConfigError } from '../../src/errors.js';

describe('config', () => {
  it('has defaults for the characters: the characters folder, lenient, watched in development', () => {
    expect(loadConfig({}).characters).toEqual({
      dir: 'characters',
      strict: false,
      watch: true,
      mcp: true,
    });
    expect(loadConfig({ NODE_ENV: 'production' }).characters.watch).toBe(false);
  });

  it('reads the environment', () => {
    const config = loadConfig({
      CHARACTERS_DIR: 'my-characters',
      CHARACTERS_STRICT: 'true',
      CHARACTERS_WATCH: 'off',
      CHARACTERS_MCP: 'false',
    });
    expect(config.characters).toEqual({
      dir: 'my-characters',
      strict: true,
      watch: false,
      mcp: false,
    });
  });

  it('lets CLI flags override the environment', () => {
    const config = loadConfig({ CHARACTERS_DIR: 'a', NODE_ENV: 'production' }, [
      '--characters-dir',
      'b',
      '--strict',
      '--watch',
    ]);
    expect(config.characters).toEqual({ dir: 'b', strict: true, watch: true, mcp: true });
    expect(loadConfig({}, ['--no-watch']).characters.watch).toBe(false);
  });

  it('names every bad value in one error', () => {
    let error: unknown;
    try {
      loadConfig({ CHARACTERS_STRICT: 'maybe', CHARACTERS_WATCH: 'sometimes' });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toBe(
      'invalid configuration:\n' +
        '  CHARACTERS_STRICT: expected true or false (or 1/0, yes/no, on/off), got "maybe"\n' +
        '  CHARACTERS_WATCH: expected true or false (or 1/0, yes/no, on/off), got "sometimes"',
    );
  });

  it('rejects unknown flags', () => {
    expect(() => loadConfig({}, ['--wacth'])).toThrow(/invalid command line: .*--wacth/);
  });
});

describe('config: server, LLM, sessions and logging', () => {
  /** The ConfigError `fn` throws. */
  function configError(fn: () => unknown): ConfigError {
    try {
      fn();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      return err as ConfigError;
    }
    throw new Error('expected a ConfigError');
  }

  it('has defaults: port 8080 on 127.0.0.1, vLLM, a 100 ms tool timeout, 10 rounds, no content in logs', () => {
    const config = loadConfig({});
    expect(config.server).toEqual({
      port: 8080,
      host: '127.0.0.1',
      allowedOrigins: [],
      allowedHosts: [],
      maxSessions: 1000,
      sessionIdleTimeoutS: 900,
      sessionMaxDurationS: 3600,
      pingIntervalS: 30,
      handshakeTimeoutS: 10,
      maxPendingFrames: 256,
      maxFrameBytes: 1024 * 1024,
      maxBufferedBytes: 4 * 1024 * 1024,
      deltaBatchMs: 0,
      shutdownGraceMs: 10_000,
      healthCacheMs: 5_000,
    });
    expect(config.llm).toEqual({
      baseURL: 'http://127.0.0.1:8000/v1',
      idleTimeoutMs: 60_000,
      totalTimeoutMs: 300_000,
      slowNoticeMs: 5_000,
      maxLineBytes: 4 * 1024 * 1024,
    });
    expect(config.sessions).toEqual({
      toolTimeoutMs: 100,
      maxToolRounds: 10,
      contextTokens: 6000,
      variantAssignment: 'first',
      compat: 'troupe',
      imageUrlHosts: [],
    });
    expect(config.log).toEqual({ level: 'info', content: false });
  });

  it('reads the hardening settings: hosts, session lifetimes, LLM deadlines, image hosts', () => {
    const config = loadConfig({
      ALLOWED_HOSTS: 'Troupe.example, voice.example',
      SESSION_IDLE_TIMEOUT_S: '60',
      SESSION_MAX_DURATION_S: '0',
      WS_PING_INTERVAL_S: '5',
      HANDSHAKE_TIMEOUT_S: '3',
      MAX_PENDING_FRAMES: '32',
      LLM_IDLE_TIMEOUT_MS: '2000',
      LLM_TOTAL_TIMEOUT_MS: '90000',
      LLM_SLOW_NOTICE_MS: '0',
      LLM_MAX_LINE_BYTES: '65536',
      IMAGE_URL_HOSTS: 'images.example',
    });
    expect(config.server).toMatchObject({
      allowedHosts: ['troupe.example', 'voice.example'],
      sessionIdleTimeoutS: 60,
      sessionMaxDurationS: 0,
      pingIntervalS: 5,
      handshakeTimeoutS: 3,
      maxPendingFrames: 32,
    });
    expect(config.llm).toMatchObject({
      idleTimeoutMs: 2000,
      totalTimeoutMs: 90_000,
      slowNoticeMs: 0,
      maxLineBytes: 65_536,
    });
    expect(config.sessions.imageUrlHosts).toEqual(['images.example']);
    expect(loadConfig({ ALLOWED_HOSTS: '*', IMAGE_URL_HOSTS: '*' }).server.allowedHosts).toBe('*');
  });

  it('points at OpenAI when only an API key is set, under either name', () => {
    expect(loadConfig({ LLM_API_KEY: 'sk-a' }).llm).toMatchObject({
      baseURL: 'https://api.openai.com/v1',
      apiKey: 'sk-a',
    });
    expect(loadConfig({ OPENAI_API_KEY: 'sk-b' }).llm).toMatchObject({
      baseURL: 'https://api.openai.com/v1',
      apiKey: 'sk-b',
    });
    expect(loadConfig({ LLM_API_KEY: 'sk-a', OPENAI_API_KEY: 'sk-b' }).llm.apiKey).toBe('sk-a');
    // A base URL wins over the key's default.
    expect(
      loadConfig({ OPENAI_API_KEY: 'sk-b', LLM_BASE_URL: 'http://10.0.0.2:8000/v1' }).llm.baseURL,
    ).toBe('http://10.0.0.2:8000/v1');
  });

  it('reads the server, LLM, session and log variables', () => {
    const config = loadConfig({
      PORT: '9000',
      HOST: '0.0.0.0',
      LLM_BASE_URL: 'http://10.0.0.2:8000/v1',
      LLM_MODEL: 'qwen',
      AUTH_TOKEN: 'secret',
      MAX_SESSIONS: '5',
      MAX_FRAME_BYTES: '2048',
      MAX_BUFFERED_BYTES: '1024',
      DELTA_BATCH_MS: '15',
      SHUTDOWN_GRACE_MS: '0',
      HEALTH_CACHE_MS: '0',
      TOOL_TIMEOUT_MS: '250',
      MAX_TOOL_ROUNDS: '3',
      DEFAULT_CHARACTER: 'weather',
      TOOL_VARIANT: 'random',
      REALTIME_COMPAT: 'openai',
      TLS_CERT: 'cert.pem',
      TLS_KEY: 'key.pem',
      LOG_LEVEL: 'debug',
      LOG_CONTENT: 'yes',
    });
    expect(config.server).toMatchObject({
      port: 9000,
      host: '0.0.0.0',
      authToken: 'secret',
      maxSessions: 5,
      maxFrameBytes: 2048,
      maxBufferedBytes: 1024,
      deltaBatchMs: 15,
      shutdownGraceMs: 0,
      healthCacheMs: 0,
      tls: { certFile: 'cert.pem', keyFile: 'key.pem' },
    });
    expect(config.llm).toMatchObject({ baseURL: 'http://10.0.0.2:8000/v1', model: 'qwen' });
    expect(config.sessions).toMatchObject({
      defaultCharacter: 'weather',
      toolTimeoutMs: 250,
      maxToolRounds: 3,
      variantAssignment: 'random',
      compat: 'openai',
    });
    expect(config.log).toEqual({ level: 'debug', content: true });
  });

  it('lets flags override the environment for port, host, LLM, default character and log level', () => {
    const config = loadConfig(
      {
        PORT: '9000',
        HOST: '0.0.0.0',
        LLM_BASE_URL: 'http://10.0.0.2:8000/v1',
        LLM_MODEL: 'a',
        DEFAULT_CHARACTER: 'plain',
        LOG_LEVEL: 'warn',
      },
      [
        '--port',
        '9100',
        '--host',
        '::1',
        '--llm-base-url',
        'http://127.0.0.1:11434/v1',
        '--llm-model',
        'b',
        '--default-character',
        'weather',
        '--log-level',
        'trace',
      ],
    );
    expect(config.server).toMatchObject({ port: 9100, host: '::1' });
    expect(config.llm).toMatchObject({ baseURL: 'http://127.0.0.1:11434/v1', model: 'b' });
    expect(config.sessions.defaultCharacter).toBe('weather');
    expect(config.log.level).toBe('trace');
  });

  it('lists a bad PORT, a bad LOG_LEVEL and TLS_CERT without TLS_KEY in one ConfigError', () => {
    const err = configError(() =>
      loadConfig({ PORT: '80a', LOG_LEVEL: 'loud', TLS_CERT: 'cert.pem' }),
    );
    expect(err.message).toBe(
      'invalid configuration:\n' +
        '  PORT: expected a whole number from 0 to 65535, got "80a"\n' +
        '  LOG_LEVEL: expected one of fatal, error, warn, info, debug, trace, silent, got "loud"\n' +
        '  TLS_CERT and TLS_KEY: set both (to serve https/wss) or neither',
    );
  });

  it('names the flag, not the variable, when a flag value is bad', () => {
    const err = configError(() => loadConfig({ PORT: '9000' }, ['--port', '70000']));
    expect(err.message).toContain('--port: expected a whole number from 0 to 65535, got "70000"');
    expect(err.message).not.toContain('  PORT:');
  });

  it('rejects values out of range and a base URL that is not http(s)', () => {
    const err = configError(() =>
      loadConfig({ MAX_SESSIONS: '0', MAX_FRAME_BYTES: '10', LLM_BASE_URL: 'localhost:8000' }),
    );
    expect(err.message).toContain('MAX_SESSIONS: expected a whole number from 1 to');
    expect(err.message).toContain('MAX_FRAME_BYTES: expected a whole number from 1024 to');
    expect(err.message).toContain('LLM_BASE_URL: expected an http(s) URL');
    expect(() => loadConfig({ TLS_KEY: 'key.pem' })).toThrow(/TLS_CERT and TLS_KEY/);
  });

  it("reads the overload guard's memory shares, 0.85 each by default, and refuses a share past 1", () => {
    expect(loadConfig({}).scale).toMatchObject({ overloadHeap: 0.85, overloadMemory: 0.85 });
    expect(loadConfig({ OVERLOAD_MEMORY: '0.7', OVERLOAD_HEAP: '0' }).scale).toMatchObject({
      overloadHeap: 0,
      overloadMemory: 0.7,
    });
    const err = configError(() => loadConfig({ OVERLOAD_MEMORY: '85' }));
    expect(err.message).toContain(
      'OVERLOAD_MEMORY: expected a share of the container\'s memory limit between 0 and 1 such as 0.85 (0 turns it off), got "85"',
    );
  });

  it('parses ALLOWED_ORIGINS: a comma list without trailing slashes, or * for any', () => {
    expect(
      loadConfig({ ALLOWED_ORIGINS: ' https://app.example/ , http://localhost:5173,,' }).server
        .allowedOrigins,
    ).toEqual(['https://app.example', 'http://localhost:5173']);
    expect(loadConfig({ ALLOWED_ORIGINS: '*' }).server.allowedOrigins).toBe('*');
    expect(loadConfig({ ALLOWED_ORIGINS: 'https://a.example,*' }).server.allowedOrigins).toBe('*');
    expect(loadConfig({ ALLOWED_ORIGINS: '' }).server.allowedOrigins).toEqual([]);
  });

  it('takes a REDIS_URL with a database number or none, and refuses anything else after the port without repeating its password', () => {
    for (const url of [
      'redis://127.0.0.1:6379',
      'redis://127.0.0.1:6379/',
      'redis://127.0.0.1:6379/2',
      'rediss://troupe:pw@redis.example:6380/15',
    ]) {
      expect(loadConfig({ REDIS_URL: url }).scale.redisUrl).toBe(url);
    }
    const err = configError(() =>
      loadConfig({ REDIS_URL: 'redis://troupe:s3cr@t@127.0.0.1:6379/abc' }),
    );
    expect(err.message).toBe(
      'invalid configuration:\n' +
        '  REDIS_URL: expected nothing after the port but a database number, such as redis://127.0.0.1:6379/2, got "redis://troupe:***@127.0.0.1:6379/abc"',
    );
    for (const url of [
      'redis://localhost/var/run/redis.sock',
      'redis://127.0.0.1:6379/-1',
      'redis://127.0.0.1:6379/0/1',
      'redis://127.0.0.1:6379?db=2',
      'redis://127.0.0.1:6379/2?keyPrefix=x:',
    ]) {
      expect(configError(() => loadConfig({ REDIS_URL: url })).message).toContain(
        'REDIS_URL: expected nothing after the port but a database number',
      );
    }
    expect(configError(() => loadConfig({ REDIS_URL: '/var/run/redis.sock' })).message).toContain(
      'REDIS_URL: expected a redis:// or rediss:// URL such as redis://127.0.0.1:6379',
    );
  });

  it('treats an empty AUTH_TOKEN as no token', () => {
    expect(loadConfig({ AUTH_TOKEN: '' }).server).not.toHaveProperty('authToken');
  });
});

describe('config: voice', () => {
  it('streams pocketsphinx partials every 300 ms unless STT_PARTIAL_MS says otherwise (0: off)', () => {
    expect(loadConfig({}).voice.stt.partialEveryMs).toBe(300);
    expect(loadConfig({ STT_PARTIAL_MS: '0' }).voice.stt.partialEveryMs).toBe(0);
    expect(loadConfig({ STT_PARTIAL_MS: '500' }).voice.stt.partialEveryMs).toBe(500);
  });

  it('defaults to the offline engines and Realtime server VAD settings', () => {
    const { voice } = loadConfig({});
    expect(voice).toEqual({
      stt: { provider: 'pocketsphinx', partialEveryMs: 300 },
      tts: { provider: 'flite' },
      vad: { threshold: 0.5, prefixPaddingMs: 300, silenceDurationMs: 500 },
      bargeInMinMs: 300,
      pauseThreshold: 0.6,
      audioLeadMs: 300,
      maxUtteranceMs: 60_000,
    });
  });

  it("points Kyutai at moshi-server's ports and OpenAI at its API unless a URL is given", () => {
    const kyutai = loadConfig({ STT_PROVIDER: 'kyutai', TTS_PROVIDER: 'kyutai' }).voice;
    expect(kyutai.stt).toEqual({ provider: 'kyutai', baseURL: 'ws://127.0.0.1:8090' });
    expect(kyutai.tts).toEqual({ provider: 'kyutai', baseURL: 'ws://127.0.0.1:8089' });
    const openai = loadConfig({
      STT_PROVIDER: 'openai',
      STT_API_KEY: 'k',
      STT_MODEL: 'whisper-1',
      STT_LANGUAGE: 'en',
      TTS_PROVIDER: 'openai',
      TTS_URL: 'http://127.0.0.1:8880/v1',
      TTS_VOICE: 'af_bella',
      TTS_WORKERS: '3',
    }).voice;
    expect(openai.stt).toEqual({
      provider: 'openai',
      baseURL: 'https://api.openai.com/v1',
      apiKey: 'k',
      model: 'whisper-1',
      language: 'en',
    });
    expect(openai.tts).toEqual({
      provider: 'openai',
      baseURL: 'http://127.0.0.1:8880/v1',
      voice: 'af_bella',
      workers: 3,
    });
  });

  it('reads the turn-taking settings and lets --stt / --tts pick engines', () => {
    const { voice } = loadConfig(
      {
        VAD_THRESHOLD: '0.7',
        VAD_PREFIX_PADDING_MS: '200',
        VAD_SILENCE_MS: '250',
        BARGE_IN_MIN_MS: '0',
        STT_PAUSE_THRESHOLD: '1',
        AUDIO_LEAD_MS: '100',
        MAX_UTTERANCE_MS: '5000',
      },
      ['--stt', 'none', '--tts', 'none'],
    );
    expect(voice).toMatchObject({
      stt: { provider: 'none' },
      tts: { provider: 'none' },
      vad: { threshold: 0.7, prefixPaddingMs: 200, silenceDurationMs: 250 },
      bargeInMinMs: 0,
      pauseThreshold: 1,
      audioLeadMs: 100,
      maxUtteranceMs: 5000,
    });
  });

  it('names each bad voice setting', () => {
    let error: unknown;
    try {
      loadConfig({ STT_PROVIDER: 'whisper', VAD_THRESHOLD: '2', TTS_URL: 'ftp://x' }, [
        '--tts',
        'say',
      ]);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as Error).message;
    expect(message).toContain(
      'STT_PROVIDER: expected pocketsphinx, openai, kyutai or none, got "whisper"',
    );
    expect(message).toContain('--tts: expected flite, espeak, openai, kyutai or none, got "say"');
    expect(message).toContain('VAD_THRESHOLD: expected a number from 0 to 1, got "2"');
    expect(message).toContain('TTS_URL: expected an http(s) or ws(s) URL');
  });
});
