/**
 * The offline demo: the LLM simulator (scripted so that every seed character
 * uses its tools, vLLM-style chunks, 150 ms to the first token) and the
 * server over characters/. Prints the web client's URL and the chat command,
 * then serves until Ctrl+C. No network, no model, no keys.
 *
 * `--check` instead talks to every character over the WebSocket (the seed
 * characters with their demo lines, any other once: a line naming its first
 * tool, or a greeting), prints the conversations and exits: 1 if a character
 * did not load or a response did not complete.
 *
 * @example npm run demo
 */
import { createServer } from 'node:net';
import WebSocket from 'ws';
import { formatCheckReport, reportOf } from '../characters/check.js';
import type { TroupeServer } from '../server/index.js';
import { handsOff } from '../characters/handoffs.js';
import { DEMO_LINES, DEMO_SCRIPT } from '../testing/scripts/demo.js';
import { startSimulator } from '../testing/simulator/index.js';
import { createChatRenderer, parseServerEvent, type Output } from './chat-render.js';
import { EXIT_USAGE, readCommandLine } from './command-line.js';
import { serve } from './serve.js';
import { DEMO_COMMAND } from './start-options.js';

/** The demo's port unless PORT says otherwise (a free one when it is taken). */
const DEMO_PORT = 8080;

const out = process.stdout;
const bold = (s: string) => (out.isTTY ? `\x1b[1m${s}\x1b[0m` : s);

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  readCommandLine(argv, DEMO_COMMAND, 'demo');
  const check = argv.includes('--check');
  const [simPort, serverArgv] = simPortOf(argv.filter((a) => a !== '--check'));
  const workers = process.env.WORKERS;
  if (workers !== undefined && workers.trim() !== '' && workers.trim() !== '1') {
    process.stderr.write(
      `demo: WORKERS=${workers} applies to npm start; the demo runs one process.\n`,
    );
  }
  const sim = await startSimulator({
    script: DEMO_SCRIPT,
    profile: 'vllm-hermes',
    latency: { ttftMs: 150, tokensPerSec: 40 },
    port: simPort,
  }).catch((err: NodeJS.ErrnoException) => {
    const why = err.code === 'EADDRINUSE' ? 'is taken' : `cannot be listened on (${err.message})`;
    process.stderr.write(
      `demo: the simulator's port ${simPort} ${why}; choose another with --sim-port.\n`,
    );
    process.exit(1);
  });
  const port = process.env.PORT ?? String((await isFree(DEMO_PORT)) ? DEMO_PORT : 0);
  const server = await serve({
    env: {
      LOG_LEVEL: 'error',
      ...process.env,
      PORT: port,
      LLM_BASE_URL: sim.url,
      LLM_API_KEY: '',
      OPENAI_API_KEY: '',
      LLM_MODEL: '',
    },
    argv: serverArgv,
  });
  const report = reportOf(server.registry);
  const characters = server.registry.list();
  // The chat command names a character there is: weather, unless the folder has none such.
  const chatWith = characters.some((c) => c.id === 'weather') ? 'weather' : characters[0]?.id;
  out.write(`${formatCheckReport(report)}\n\n`);
  out.write(
    `${bold('Troupe demo')}: offline, with a simulated LLM (vLLM-style chunks, 150 ms to first token)\n\n`,
  );
  out.write(`  web client   ${bold(`${server.url}/`)}\n`);
  out.write(`  realtime     ${server.wsUrl}\n`);
  out.write(
    `  terminal     ${bold(`npm run chat -- --character ${chatWith ?? '<id>'} --url ${server.wsUrl}`)}\n`,
  );
  out.write(`  voice        ${await voiceLine(server)}\n`);
  out.write(`  simulator    ${sim.url} (the simulated LLM, OpenAI-compatible)\n\n`);
  const seeds = Object.entries(DEMO_LINES).filter(([id]) => characters.some((c) => c.id === id));
  if (seeds.length > 0) {
    out.write("Lines the simulated model answers (each uses the character's tools):\n");
  }
  for (const [id, lines] of seeds) {
    out.write(`  ${id.padEnd(11)} ${lines.map((l) => `"${l}"`).join(' · ')}\n`);
  }
  // Characters the script has no lines for (the user's own) improvise from their tools.
  const others = characters.filter((c) => !(c.id in DEMO_LINES));
  if (others.length > 0) {
    out.write('Other characters improvise: a line that names one of their tools calls it.\n');
    for (const c of others) {
      out.write(`  ${c.id.padEnd(11)} ${c.tools.length ? c.tools.join(', ') : '(no tools)'}\n`);
    }
  }
  out.write('\nPoint LLM_BASE_URL at vLLM or OpenAI and run `npm start` for a real model.\n');

  if (!check) {
    out.write('Ctrl+C stops the demo.\n');
    return;
  }
  let failed = 0;
  for (const [id, lines] of seeds) failed += await converse(server, id, lines);
  for (const c of others) failed += await converse(server, c.id, [improvisedLine(c.tools)]);
  await server.shutdown(1_000);
  await sim.close();
  const broken = report.rows.filter((r) => r.status !== 'ok').length;
  out.write(`${checkVerdict(broken, failed)}\n`);
  process.exit(broken === 0 && failed === 0 ? 0 : 1);
}

/**
 * What `--check` says to a character the script has no lines for: a line
 * naming its first tool, which the simulator improvises a call of; a
 * greeting when it has no tools.
 */
function improvisedLine(tools: readonly string[]): string {
  return tools[0] === undefined ? 'Hello there!' : `Please use ${tools[0]}.`;
}

/** The last line of `--check`: whether every character loaded and every response completed. */
function checkVerdict(broken: number, failed: number): string {
  const responses =
    failed === 0
      ? 'every response completed'
      : `${failed} response${failed === 1 ? '' : 's'} did not complete`;
  if (broken === 0) return `demo check: ${responses}`;
  const characters = `${broken} character${broken === 1 ? '' : 's'} with errors (listed above)`;
  return `demo check: failed: ${characters}; ${responses}`;
}

/** One conversation over the public protocol; returns the responses that did not complete. */
async function converse(
  server: TroupeServer,
  id: string,
  lines: readonly string[],
): Promise<number> {
  const ws = new WebSocket(`${server.wsUrl}?character=${id}`);
  const renderer = createChatRenderer({ color: out.isTTY === true });
  const write = (outputs: Output[]) => {
    for (const o of outputs) (o.stream === 'stderr' ? process.stderr : out).write(o.text);
  };
  let failed = 0;
  let done: (() => void) | undefined;
  // Background tool calls still running, and a result not yet told: the follow-up is part of the conversation.
  let background = 0;
  let untold = false;
  ws.on('message', (data) => {
    const event = parseServerEvent(data.toString());
    if (!event) return;
    if (event.type === 'troupe.tool_call.result' && event.background === 'started') background++;
    if (event.type === 'troupe.background_tool.done') {
      background--;
      untold = true;
    }
    // Any response after a result tells it (the server makes no extra one then).
    if (event.type === 'response.done') untold = false;
    write(renderer.render(event));
    if (event.type === 'response.done') {
      const status = (event.response as { status?: string } | undefined)?.status;
      if (status !== 'completed') failed++;
      // A transfer to another character: that character's response follows.
      if (!handsOff(event.response)) done?.();
    }
  });
  await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
  for (const text of lines) {
    write(renderer.user(text));
    const finished = new Promise<void>((resolve) => (done = resolve));
    ws.send(
      JSON.stringify({
        type: 'conversation.item.create',
        item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] },
      }),
    );
    ws.send(JSON.stringify({ type: 'response.create' }));
    await finished;
  }
  // A background result is told in a response of its own, after the lines.
  while (background > 0 || untold) await new Promise<void>((resolve) => (done = resolve));
  write(renderer.endLine());
  out.write('\n');
  ws.close(1000);
  return failed;
}

/** What speech the demo offers: the engines, or what to install. */
async function voiceLine(server: TroupeServer): Promise<string> {
  const { stt, tts } = server.voice;
  if (!stt && !tts) return 'off (STT_PROVIDER=none, TTS_PROVIDER=none)';
  const [heard, spoken] = await Promise.all([stt?.health(), tts?.health()]);
  const engines = `${stt?.name ?? 'no STT'} + ${tts?.name ?? 'no TTS'}`;
  const problems = [heard, spoken].filter((h) => h && !h.ok).map((h) => h!.detail);
  if (problems.length > 0) return `${engines}, not ready: ${problems.join('; ')}`;
  return `${engines}: press the microphone in the web client, or add --voice to the chat command`;
}

/** `--sim-port N` (or `=N`): the port, and the arguments left for the server. */
function simPortOf(argv: readonly string[]): [number, string[]] {
  const rest: string[] = [];
  let given: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--sim-port') given = argv[++i];
    else if (arg.startsWith('--sim-port=')) given = arg.slice('--sim-port='.length);
    else rest.push(arg);
  }
  if (given === undefined) return [0, rest];
  const port = /^\d{1,5}$/.test(given) ? Number(given) : NaN;
  if (!(port <= 65_535)) {
    process.stderr.write(`demo: --sim-port: expected a port from 0 to 65535, got "${given}".\n`);
    process.exit(EXIT_USAGE);
  }
  return [port, rest];
}

function isFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer()
      .once('error', () => resolve(false))
      .listen(port, '127.0.0.1', () => probe.close(() => resolve(true)));
  });
}

await main();
