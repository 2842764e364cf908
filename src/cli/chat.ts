/**
 * The terminal chat client: talks to one character over the realtime
 * WebSocket, streaming replies and showing every tool call. Interactive on a
 * terminal (a `you: ` prompt, Ctrl+C to stop a reply); with stdin piped it
 * sends one turn per line, waiting for each reply, and exits after the last.
 *
 * @example npm run chat -- --character weather --url ws://127.0.0.1:8080/v1/realtime
 */
import { clearLine, createInterface, cursorTo, type Interface } from 'node:readline';
import WebSocket from 'ws';
import {
  CHAT_USAGE,
  ChatUsageError,
  EXIT_USAGE,
  parseChatArgs,
  type ChatOptions,
} from './chat-options.js';
import {
  announcesGreeting,
  createChatRenderer,
  describeClose,
  describeConnectError,
  describeRejectedUpgrade,
  isAssistantMessage,
  parseServerEvent,
  type ChatRenderer,
  type Output,
  type ServerEvent,
} from './chat-render.js';

/** How long a clean close may take before the socket is dropped; ws would wait 30 s. */
const CLOSE_GRACE_MS = 2_000;
/** Most of an HTTP error body kept for the message when the upgrade is refused. */
const MAX_REJECTION_BODY_CHARS = 2_000;

const COMMANDS_HELP = `Commands: /cancel stops the reply, /quit quits, /help shows this list.
Keys: Ctrl+C stops a reply (or quits when idle), Ctrl+D quits.`;

/** How a turn ended, for the piped mode's bookkeeping. */
type TurnEnd = 'done' | 'rejected' | 'closed';

/** The socket plus what the rest of the client needs to know about it. */
interface Connection {
  ws: WebSocket;
  renderer: ChatRenderer;
  /** Resolves when the socket is open; rejects with the one line to print when it never opens. */
  opened: Promise<void>;
  /**
   * Resolves once `session.created` (and the greeting it announces) arrived;
   * rejects if the socket closes first.
   */
  ready: Promise<void>;
  /** Sends one user line and asks for a response; resolves when the turn is over. */
  turn(text: string): Promise<TurnEnd>;
  /** Asks the server to stop the response in flight. */
  cancel(): void;
  /** Whether a turn is waiting for its `response.done`. */
  readonly busy: boolean;
  /** Whether the server sent an `error` or a failed response (piped mode exits 1). */
  readonly troubled: boolean;
  /** Closes with 1000 and waits for the socket to be gone. */
  quit(): Promise<void>;
  /** Resolves when the socket closes, with whether we asked for it. */
  closed: Promise<{ code: number; reason: string; byUs: boolean }>;
}

/** Writes renderer output; the interactive mode swaps it for one that keeps the prompt intact. */
type Sink = (outputs: Output[]) => void;

function writePlain(outputs: Output[]): void {
  for (const { stream, text } of outputs) {
    (stream === 'stdout' ? process.stdout : process.stderr).write(text);
  }
}

/**
 * Opens the socket and wires it to the renderer and the turn bookkeeping.
 * Every listener is attached before the socket can open: a server sends
 * `session.created` and the greeting right after the upgrade, often in the
 * same TCP read as the 101 answer, so ws emits them in the same tick as
 * 'open' — a listener added after awaiting 'open' would miss them.
 */
function connect(options: ChatOptions, renderer: ChatRenderer, sink: () => Sink): Connection {
  const headers: Record<string, string> = {};
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
  const ws = new WebSocket(options.url, { headers });
  let nextId = 0;
  let closingByUs = false;
  let troubled = false;
  /** The turn waiting for its response: the id of its `response.create`, and how to end it. */
  let pending: { createId: string; end: (how: TurnEnd) => void } | undefined;

  let settleOpen: (failure?: string) => void = () => undefined;
  const opened = new Promise<void>((resolve, reject) => {
    let settled = false;
    settleOpen = (failure) => {
      if (settled) return;
      settled = true;
      if (failure === undefined) resolve();
      else {
        reject(new Error(failure));
        ws.terminate();
      }
    };
  });
  // Kept for the socket's whole life: an 'error' without a listener would crash
  // the process. After the open, the 'close' that follows an error reports it.
  ws.on('error', (err) => settleOpen(describeConnectError(options.url, err)));
  ws.once('unexpected-response', (_req, res) => {
    // The server answered the upgrade with plain HTTP (401, 404, 503…): its body says why.
    let body = '';
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => {
      if (body.length < MAX_REJECTION_BODY_CHARS) body += chunk;
    });
    const done = (): void =>
      settleOpen(
        describeRejectedUpgrade(
          options.url,
          res.statusCode ?? 0,
          res.statusMessage ?? '',
          body.slice(0, MAX_REJECTION_BODY_CHARS),
        ),
      );
    res.once('end', done);
    res.once('error', done);
    res.once('close', done);
  });
  ws.once('open', () => settleOpen());

  const closed = new Promise<{ code: number; reason: string; byUs: boolean }>((resolve) => {
    ws.once('close', (code, reason) => {
      pending?.end('closed');
      resolve({ code, reason: reason.toString('utf8'), byUs: closingByUs });
    });
  });
  let markReady: () => void = () => undefined;
  const ready = new Promise<void>((resolve, reject) => {
    markReady = resolve;
    void closed.then(() => reject(new Error('the connection closed before the session started')));
  });
  /** `session.created` announced a greeting that has not arrived yet. */
  let greetingDue = false;
  // Nobody may be awaiting `ready` when the socket closes (the close is reported on its own).
  ready.catch(() => undefined);
  opened.catch(() => undefined);

  function send(event: Record<string, unknown>): string {
    const eventId = `evt_chat_${++nextId}`;
    if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ event_id: eventId, ...event }));
    return eventId;
  }

  function onEvent(event: ServerEvent): void {
    sink()(renderer.render(event));
    // Ready once the greeting is on screen too. The server sends it right
    // after session.created, but often in a later TCP read: a piped first line
    // echoed in between would print "you: …" above the greeting.
    if (event.type === 'session.created') {
      greetingDue = announcesGreeting(event);
      if (!greetingDue) markReady();
    } else if (greetingDue && (isAssistantMessage(event) || event.type.startsWith('response.'))) {
      greetingDue = false;
      markReady();
    }
    if (event.type === 'error') {
      troubled = true;
      // A `response.create` the server refused never gets a `response.done`: the
      // error's event_id names it, so the turn ends here instead of hanging.
      const causedBy = (event.error as { event_id?: unknown } | undefined)?.event_id;
      if (pending !== undefined && causedBy === pending.createId) pending.end('rejected');
    } else if (event.type === 'response.done') {
      const status = (event.response as { status?: unknown } | undefined)?.status;
      if (status === 'failed') troubled = true;
      pending?.end('done');
    }
  }

  ws.on('message', (data, isBinary) => {
    if (isBinary) return; // audio frames of other dialects; this client is text only
    const event = parseServerEvent(String(data));
    if (event === undefined) {
      sink()(renderer.note('(ignored a frame that is not a JSON event)'));
      return;
    }
    onEvent(event);
  });

  return {
    ws,
    renderer,
    opened,
    ready,
    closed,
    get busy() {
      return pending !== undefined;
    },
    get troubled() {
      return troubled;
    },
    turn(text) {
      return new Promise<TurnEnd>((resolve) => {
        if (ws.readyState !== WebSocket.OPEN) {
          resolve('closed');
          return;
        }
        send({
          type: 'conversation.item.create',
          item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] },
        });
        const createId = send({ type: 'response.create' });
        pending = {
          createId,
          end: (how) => {
            pending = undefined;
            resolve(how);
          },
        };
      });
    },
    cancel() {
      send({ type: 'response.cancel' });
    },
    async quit() {
      if (ws.readyState === WebSocket.CLOSED) return;
      closingByUs = true;
      // A server that never answers the close frame must not keep the user waiting.
      const timer = setTimeout(() => ws.terminate(), CLOSE_GRACE_MS);
      timer.unref();
      ws.close(1000, 'bye');
      await closed;
      clearTimeout(timer);
    },
  };
}

/** Piped stdin: one turn per line, each after the previous reply; exit code out. */
async function runPiped(conn: Connection, sink: Sink): Promise<number> {
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
  if (conn.ws.readyState !== WebSocket.OPEN) return lost();
  await conn.quit();
  return conn.troubled ? 1 : 0;
}

/** A terminal: prompt, streamed replies, Ctrl+C to cancel; exit code out. */
async function runInteractive(
  conn: Connection,
  rl: Interface,
  setSink: (sink: Sink) => void,
): Promise<number> {
  const { renderer } = conn;
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
        else prompt();
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
      writePlain([
        ...renderer.endLine(),
        { stream: 'stderr', text: `${describeClose(code, reason)}\n` },
      ]);
      resolve(1);
    });
  });

  try {
    await conn.ready;
    prompt();
  } catch {
    // Closed before the session began: `finished` reports it.
  }
  const code = await finished;
  rl.close();
  return code;
}

/** Parses flags, connects, runs the right mode; resolves with the exit code. */
async function main(argv: string[]): Promise<number> {
  let options: ChatOptions;
  try {
    options = parseChatArgs(argv);
  } catch (err) {
    if (!(err instanceof ChatUsageError)) throw err;
    process.stderr.write(`chat: ${err.message}\nRun npm run chat -- --help for the options.\n`);
    return EXIT_USAGE;
  }
  if (options.help) {
    process.stdout.write(`${CHAT_USAGE}\n`);
    return 0;
  }
  const interactive = process.stdin.isTTY === true;
  const color = process.stdout.isTTY === true && !options.noColor;
  const renderer = createChatRenderer({ color });
  if (interactive) writePlain(renderer.note(`connecting to ${options.url}…`));

  let sink: Sink = writePlain;
  const conn = connect(options, renderer, () => sink);
  try {
    await conn.opened;
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    return 1;
  }
  if (!interactive) return runPiped(conn, writePlain);

  const rl = createInterface({
    input: process.stdin,
    output: process.stdout,
    prompt: color ? '\x1b[1myou:\x1b[0m ' : 'you: ',
    terminal: true,
  });
  return runInteractive(conn, rl, (next) => {
    sink = next;
  });
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
    // Piped stdin may still be open (a /quit line, a lost connection): let go of it.
    if (!process.stdin.readableEnded) process.stdin.destroy();
  },
  (err: unknown) => {
    process.stderr.write(
      `chat: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exitCode = 1;
  },
);
