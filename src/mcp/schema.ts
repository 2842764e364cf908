/**
 * The shape of a character's `mcp` entries, checked by the character
 * validator (src/characters/validate.ts) field by field.
 */
import { z } from 'zod';
import { MAX_CHARACTER_TOOL_TIMEOUT_MS } from '../characters/constants.js';
import { MCP_LABEL_PATTERN } from './constants.js';

const stringRecord = (what: string, example: string) =>
  z.record(z.string(), z.string({ error: `expected a string (${what})` }), {
    error: `expected an object of strings such as ${example}`,
  });

/** One entry of `mcp`. */
export const mcpServerSchema = z
  .strictObject(
    {
      label: z
        .string({ error: 'expected a label (a string) such as "files"' })
        .refine((s) => MCP_LABEL_PATTERN.test(s), {
          error: 'is not a valid label; use 1-64 letters, digits, "_" or "-" such as "files"',
        }),
      url: z
        .string({ error: 'expected the URL of a streamable-HTTP MCP server' })
        .refine((s) => /^https?:\/\/[^\s]+$/.test(s) && URL.canParse(s), {
          error: 'expected an http:// or https:// URL such as "http://127.0.0.1:8931/mcp"',
        })
        .optional(),
      command: z
        .string({ error: 'expected the program of an stdio MCP server such as "node"' })
        .min(1, { error: 'expected the program of an stdio MCP server such as "node"' })
        .optional(),
      args: z
        .array(z.string({ error: 'expected a string' }), {
          error: 'expected an array of strings such as ["mcp/server.mjs"]',
        })
        .optional(),
      env: stringRecord('an environment value', '{ API_KEY: process.env.API_KEY }').optional(),
      headers: stringRecord(
        'a header value',
        '{ Authorization: `Bearer ${process.env.TOKEN}` }',
      ).optional(),
      allowedTools: z
        .array(z.string({ error: 'expected a tool name as the server lists it' }), {
          error: 'expected an array of tool names such as ["read_file"]',
        })
        .optional(),
      timeoutMs: z
        .number({ error: 'expected a number of milliseconds such as 5000' })
        .positive({ error: 'expected a positive number of milliseconds such as 5000' })
        .max(MAX_CHARACTER_TOOL_TIMEOUT_MS, {
          error: `expected at most ${MAX_CHARACTER_TOOL_TIMEOUT_MS} ms`,
        })
        .optional(),
    },
    {
      error:
        'expected an MCP server such as { label: "files", command: "node", args: ["mcp/server.mjs"] } or { label: "search", url: "http://127.0.0.1:8931/mcp" }',
    },
  )
  .superRefine((entry, ctx) => {
    const has = (k: string) => (entry as Record<string, unknown>)[k] !== undefined;
    if (has('url') === has('command')) {
      ctx.addIssue({
        code: 'custom',
        path: [],
        input: undefined,
        message: has('url')
          ? 'has both url and command; give url for a streamable-HTTP server or command (+ args) for an stdio server, not both'
          : 'missing url or command; give url for a streamable-HTTP server or command (+ args) for an stdio server',
      });
    }
    for (const [field, needs] of [
      ['args', 'command'],
      ['env', 'command'],
      ['headers', 'url'],
    ] as const) {
      if (has(field) && !has(needs)) {
        ctx.addIssue({
          code: 'custom',
          path: [field],
          input: undefined,
          message: `only applies to ${needs === 'url' ? 'a url (streamable-HTTP) server' : 'a command (stdio) server'}; remove it or give ${needs}`,
        });
      }
    }
  });

/** The fields of an `mcp` entry, for "did you mean" hints. */
export const MCP_SERVER_FIELDS = Object.keys(mcpServerSchema.shape);
