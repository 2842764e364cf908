/**
 * The flags of `npm start` (the server) and `npm run demo`, for their help
 * and unknown-flag messages. The settings themselves are read by src/config/.
 */
import { DEFAULT_WORKERS } from '../config/defaults.js';
import { HELP_FLAG, type CommandInfo, type FlagInfo } from './command-line.js';

/** Flags the server takes; each overrides its environment variable. */
export const SERVER_FLAGS: readonly FlagInfo[] = [
  { name: 'port', value: 'N', help: 'port to listen on (PORT, default 8080; 0 = any free port)' },
  { name: 'host', value: 'HOST', help: 'interface to bind (HOST, default 127.0.0.1)' },
  {
    name: 'llm-base-url',
    value: 'URL',
    help: 'any OpenAI-compatible endpoint (LLM_BASE_URL, default http://127.0.0.1:8000/v1)',
  },
  {
    name: 'llm-model',
    value: 'NAME',
    help: 'the model (LLM_MODEL, default the only one the endpoint lists)',
  },
  {
    name: 'characters-dir',
    value: 'DIR',
    help: 'the folder of character files (CHARACTERS_DIR, default characters)',
  },
  {
    name: 'default-character',
    value: 'ID',
    help: 'character of connections that name none (DEFAULT_CHARACTER)',
  },
  { name: 'strict', help: 'refuse to start on any character error (CHARACTERS_STRICT=true)' },
  { name: 'watch', help: 'reload characters when their files change (CHARACTERS_WATCH=true)' },
  { name: 'no-watch', help: 'do not watch character files (CHARACTERS_WATCH=false)' },
  {
    name: 'log-level',
    value: 'LEVEL',
    help: 'fatal, error, warn, info, debug, trace or silent (LOG_LEVEL, default info)',
  },
  {
    name: 'stt',
    value: 'PROVIDER',
    help: 'speech-to-text: pocketsphinx, openai, kyutai or none (STT_PROVIDER)',
  },
  {
    name: 'tts',
    value: 'PROVIDER',
    help: 'text-to-speech: flite, espeak, openai, kyutai or none (TTS_PROVIDER)',
  },
  {
    name: 'workers',
    value: 'N',
    help: `server processes: a number, or auto for one per core (WORKERS, default ${DEFAULT_WORKERS})`,
  },
];

const SETTINGS =
  'Every setting is an environment variable; the common ones also have the flags above.\n' +
  'All of them, with defaults: docs/configuration.md.';

/** `npm start`. */
export const START_COMMAND: CommandInfo = {
  usage: 'npm start -- [flags]',
  summary:
    'Run the Troupe server: the characters in CHARACTERS_DIR, talking to an OpenAI-compatible LLM.',
  flags: [...SERVER_FLAGS, HELP_FLAG],
  more:
    `${SETTINGS}\n\nExamples:\n` +
    '  LLM_BASE_URL=http://127.0.0.1:8000/v1 npm start\n' +
    '  OPENAI_API_KEY=sk-… LLM_MODEL=gpt-4o-mini npm start -- --port 9000',
  helpCommand: 'npm start -- --help',
};

/** Server flags the demo has no use for: its own LLM, and one process. */
const DEMO_LEAVES_OUT = new Set(['llm-base-url', 'llm-model', 'workers']);

/** `npm run demo`. */
export const DEMO_COMMAND: CommandInfo = {
  usage: 'npm run demo -- [flags]',
  summary:
    'The offline demo: the server and the characters on the built-in LLM simulator.\n' +
    "No model, no network, no keys. One process: workers (WORKERS) are npm start's.\n" +
    'With --check, the seed characters say their demo lines and any other character is sent\n' +
    'one line naming its first tool ("Hello there!" when it has none); the conversations are\n' +
    'printed, and the last line says whether every character loaded and every response completed.',
  flags: [
    {
      name: 'check',
      help: 'talk to every character and exit: 1 if one did not load or a response failed',
    },
    {
      name: 'sim-port',
      value: 'N',
      help: 'port of the simulated LLM, for a server or client of your own (default any free port)',
    },
    ...SERVER_FLAGS.filter((f) => !DEMO_LEAVES_OUT.has(f.name)),
    HELP_FLAG,
  ],
  more: SETTINGS,
  helpCommand: 'npm run demo -- --help',
};
