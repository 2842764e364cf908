/**
 * `npm start`: the server, configured by environment variables and flags
 * (see docs/configuration.md); `WORKERS` processes (default: one per core).
 *
 * @example PORT=9000 LLM_BASE_URL=http://127.0.0.1:8000/v1 npm start
 */
import { start } from './serve.js';

await start({ env: process.env, argv: process.argv.slice(2) });
