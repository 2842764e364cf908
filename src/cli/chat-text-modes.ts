/**
 * The chat client's typed modes: piped stdin (one turn per line, each after
 * the previous reply) and the interactive terminal (a prompt kept intact
 * under streamed output, Ctrl+C to stop a reply, lines typed meanwhile
 * queued).
 */
import { clearLine, createInterface, cursorTo, type Interface } from 'node:readline';
import WebSocket from 'ws';
import { writePlain, type Connection, type Sink } from './chat-connection.js';
import { describeClose } from './chat-connect-errors.js';
import { startVoice, type Voice, type VoiceSetup } from './chat-voice-setup.js';

/** What `/help` prints. */
const COMMANDS_HELP = `Commands: /cancel stops the reply, /quit quits, /help shows this list.
Keys: Ctrl+C stops a reply (or quits when idle), Ctrl+D quits.`;

/** Piped stdin: one turn per line, each after the previous reply; exit code out. */
export async function runPiped(conn: Connection, sink: Sink, setup?: VoiceSetup): Promise<number> {
  const lost = async (): Promise<number> => {
    const { code, reason } = await conn.closed;
    sink([
      ...conn.renderer.endLine(),
      { stream: 'stderr', text: `${describeClose(code, reason)}\n` },
    ]);
    return 1;
  };
  try {
    await conn.ready;
  } catch {
    return lost(); // the socket closed before the session began
  }
  const voice = setup === undefined ? undefined : await startVoice(conn, setup, () => sink);
  // Made only now and iterated in the same tick: readline emits lines as soon
  // as it reads them, and drops those that come before an iterator listens.
  const lines = createInterface({ input: process.stdin, crlfDelay: Infinity, terminal: false });
  void conn.closed.then(({ byUs }) => {
    // The socket went away under us while we wait for input: stop reading.
    if (!byUs) lines.close();
  });
  try {
    for await (const raw of lines) {
      const text = raw.trim();
      if (text === '') continue;
      if (text === '/quit') break;
      if (text === '/help') {
        sink(conn.renderer.note(COMMANDS_HELP));
        continue;
      }
      if (text === '/cancel') continue; // nothing is in flight between piped lines
      sink(conn.renderer.user(text));
      if ((await conn.turn(text)) === 'closed') break;
    }
  } finally {
    lines.close();
  }
  if (conn.ws.readyState !== WebSocket.OPEN) {
    voice?.player?.close();
    return lost();
  }
  // The last reply may still be playing: let it finish before leaving.
  await voice?.player?.finish();
  await conn.quit();
  return conn.troubled ? 1 : 0;
}

/** A terminal: prompt, streamed replies, Ctrl+C to cancel; exit code out. */
export async function runInteractive(
  conn: Connection,
  rl: Interface,
  setSink: (sink: Sink) => void,
  setup?: VoiceSetup,
): Promise<number> {
  const { renderer } = conn;
  /** Spoken replies, once the session is ready. */
  let voice: Voice | undefined;
  let promptShown = false;
  let cancelSent = false;
  const queued: string[] = [];

  // Output that arrives while the prompt is on screen (the greeting, an error)
  // goes above it: clear the prompt line, print, then redraw the prompt with
  // whatever the user had typed so far.
  const sink: Sink = (outputs) => {
    if (outputs.length === 0) return;
    if (promptShown) {
      cursorTo(process.stdout, 0);
      clearLine(process.stdout, 0);
    }
    writePlain(outputs);
    if (promptShown) {
      writePlain(renderer.endLine());
      rl.prompt(true);
    }
  };
  setSink(sink);

  function prompt(): void {
    writePlain(renderer.endLine());
    promptShown = true;
    rl.prompt();
  }

  async function converse(text: string): Promise<void> {
    promptShown = false;
    cancelSent = false;
    const how = await conn.turn(text);
    if (how === 'closed') return;
    const next = queued.shift();
    if (next !== undefined) {
      sink(renderer.user(next));
      void converse(next);
    } else prompt();
  }

  function cancel(): void {
    if (!conn.busy) return;
    cancelSent = true;
    conn.cancel();
    // What was already sent to the player would go on talking: cut it, and say how much was heard.
    voice?.session.stopPlayback();
  }

  const finished = new Promise<number>((resolve) => {
    let quitting = false;
    const quit = (): void => {
      if (quitting) return;
      quitting = true;
      // Leave the terminal on a fresh line, not after a dangling "you: ".
      if (promptShown) process.stdout.write('\n');
      promptShown = false;
      writePlain(renderer.endLine());
      voice?.player?.close();
      void conn.quit().then(() => resolve(0));
    };
    rl.on('line', (raw) => {
      // Enter moved the cursor past the prompt: output may now go straight out.
      promptShown = false;
      const text = raw.trim();
      if (text === '/quit') return quit();
      if (text === '/help') {
        sink(renderer.note(COMMANDS_HELP));
        if (!conn.busy) prompt();
        return;
      }
      if (text === '/cancel') {
        if (conn.busy) cancel();
        else {
          if (voice?.session.playing) voice.session.stopPlayback();
          prompt();
        }
        return;
      }
      if (text.startsWith('/')) {
        sink(renderer.note(`unknown command ${text.split(/\s/)[0]}; /help lists them`));
        if (!conn.busy) prompt();
        return;
      }
      if (text === '') {
        if (!conn.busy) prompt();
        return;
      }
      // Typed while a reply streams: sent once that reply is done.
      if (conn.busy) queued.push(text);
      else void converse(text);
    });
    rl.on('SIGINT', () => {
      // Ctrl+C stops the reply; a second one while the cancel is pending, or
      // one at the prompt, quits.
      if (conn.busy && !cancelSent) {
        queued.length = 0;
        cancel();
      } else if (voice?.session.playing) {
        // The reply is done but still being spoken: the first Ctrl+C silences it.
        voice.session.stopPlayback();
      } else quit();
    });
    rl.on('close', quit); // Ctrl+D
    void conn.closed.then(({ code, reason, byUs }) => {
      if (byUs) return;
      if (promptShown) {
        cursorTo(process.stdout, 0);
        clearLine(process.stdout, 0);
      }
      promptShown = false;
      voice?.player?.close();
      writePlain([
        ...renderer.endLine(),
        { stream: 'stderr', text: `${describeClose(code, reason)}\n` },
      ]);
      resolve(1);
    });
  });

  try {
    await conn.ready;
    if (setup !== undefined) voice = await startVoice(conn, setup, () => sink);
    prompt();
  } catch {
    // Closed before the session began: `finished` reports it.
  }
  const code = await finished;
  rl.close();
  return code;
}
