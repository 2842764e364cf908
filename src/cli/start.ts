/**
 * `npm start`: the server, configured by environment variables and flags
 * (see docs/configuration.md).
 *
 * @example PORT=9000 LLM_BASE_URL=http://127.0.0.1:8000/v1 npm start
 */
import { checkLlm, startupBanner } from './banner.js';
import { readCommandLine } from './command-line.js';
import { serve } from './serve.js';
import { START_COMMAND } from './start-options.js';

readCommandLine(process.argv.slice(2), START_COMMAND, 'troupe');
// On a terminal: human log lines and a banner; piped (production, log shippers): JSON lines.
const terminal = process.stdout.isTTY === true;
const server = await serve({ env: process.env, argv: process.argv.slice(2), prettyLogs: terminal });
if (terminal) process.stdout.write(`${startupBanner(server, await checkLlm(server), true)}\n`);
