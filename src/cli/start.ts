/**
 * `npm start`: the server, configured by environment variables and flags
 * (see docs/configuration.md); `WORKERS` processes (see docs/deployment.md).
 *
 * @example PORT=9000 LLM_BASE_URL=http://127.0.0.1:8000/v1 npm start
 */
import { checkLlm, startupBanner } from './banner.js';
import { readCommandLine } from './command-line.js';
import { start } from './serve.js';
import { START_COMMAND } from './start-options.js';

readCommandLine(process.argv.slice(2), START_COMMAND, 'troupe');
// On a terminal: human log lines and a banner; piped (log shippers) or in
// production (NODE_ENV=production): JSON lines.
const terminal = process.stdout.isTTY === true && process.env.NODE_ENV !== 'production';
const server = await start({ env: process.env, argv: process.argv.slice(2), prettyLogs: terminal });
// One process serving: the banner. The primary of several workers has no server of its own.
if (terminal && server) {
  process.stdout.write(`${startupBanner(server, await checkLlm(server), true)}\n`);
}
