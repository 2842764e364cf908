/**
 * A small MCP server of unit conversions, for the `kitchen` character: built
 * with the official SDK's `McpServer`, spoken over stdio. Plain JavaScript so
 * Node runs it as it is (no build step, no tsx), and nothing but arithmetic:
 * it starts in about a tenth of a second and never touches the network.
 *
 * Tools: `convert` (a value from one unit to another of the same kind),
 * `list_units` (the units it knows, by kind) and `unit_info` (what a unit is,
 * left out by the kitchen character's `allowedTools`).
 *
 * Try it on its own: `npx @modelcontextprotocol/inspector node characters/mcp/units-server.mjs`.
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

/**
 * Units by kind: the factor to the kind's base unit (metre, gram, millilitre);
 * temperature has its own formulas. US customary cups and spoons.
 */
const UNITS = {
  length: { mm: 0.001, cm: 0.01, m: 1, km: 1000, in: 0.0254, ft: 0.3048, yd: 0.9144, mi: 1609.344 },
  mass: { mg: 0.001, g: 1, kg: 1000, oz: 28.349523125, lb: 453.59237 },
  volume: {
    ml: 1,
    l: 1000,
    tsp: 4.92892159375,
    tbsp: 14.78676478125,
    fl_oz: 29.5735295625,
    cup: 236.5882365,
    pint: 473.176473,
    quart: 946.352946,
    gallon: 3785.411784,
  },
  temperature: { c: 1, f: 1, k: 1 },
};

const NAMES = {
  mm: 'millimetre',
  cm: 'centimetre',
  m: 'metre',
  km: 'kilometre',
  in: 'inch',
  ft: 'foot',
  yd: 'yard',
  mi: 'mile',
  mg: 'milligram',
  g: 'gram',
  kg: 'kilogram',
  oz: 'ounce (avoirdupois)',
  lb: 'pound',
  ml: 'millilitre',
  l: 'litre',
  tsp: 'teaspoon (US)',
  tbsp: 'tablespoon (US)',
  fl_oz: 'fluid ounce (US)',
  cup: 'cup (US)',
  pint: 'pint (US)',
  quart: 'quart (US)',
  gallon: 'gallon (US)',
  c: 'degree Celsius',
  f: 'degree Fahrenheit',
  k: 'kelvin',
};

const ALL = Object.keys(NAMES);

/** The kind of a unit, or undefined. */
function kindOf(unit) {
  return Object.keys(UNITS).find((kind) => unit in UNITS[kind]);
}

function toCelsius(value, unit) {
  if (unit === 'f') return ((value - 32) * 5) / 9;
  if (unit === 'k') return value - 273.15;
  return value;
}

function fromCelsius(value, unit) {
  if (unit === 'f') return (value * 9) / 5 + 32;
  if (unit === 'k') return value + 273.15;
  return value;
}

/** Rounds to at most `digits` significant digits, without trailing zeros. */
function round(value, digits = 4) {
  return Number(value.toPrecision(digits));
}

function text(value) {
  return { content: [{ type: 'text', text: value }] };
}

function failure(message) {
  return { isError: true, content: [{ type: 'text', text: message }] };
}

const server = new McpServer({ name: 'troupe-units', version: '1.0.0' });

server.registerTool(
  'convert',
  {
    description:
      'Convert a value from one unit to another of the same kind (length, mass, volume or temperature). ' +
      'Returns the converted value, rounded to 4 significant digits.',
    inputSchema: {
      value: z.number().describe('The amount to convert'),
      from: z.enum(ALL).describe('The unit of the value'),
      to: z.enum(ALL).describe('The unit wanted'),
    },
    outputSchema: { value: z.number(), unit: z.string() },
  },
  ({ value, from, to }) => {
    const kind = kindOf(from);
    if (kind !== kindOf(to)) {
      return failure(
        `cannot convert ${NAMES[from]} (${kind}) to ${NAMES[to]} (${kindOf(to)}): pick two units of the same kind`,
      );
    }
    const exact =
      kind === 'temperature'
        ? fromCelsius(toCelsius(value, from), to)
        : (value * UNITS[kind][from]) / UNITS[kind][to];
    const result = round(exact);
    return {
      content: [{ type: 'text', text: `${value} ${from} = ${result} ${to}` }],
      structuredContent: { value: result, unit: to },
    };
  },
);

server.registerTool(
  'list_units',
  {
    description: 'List the units this server knows, by kind.',
    inputSchema: {
      kind: z.enum(Object.keys(UNITS)).optional().describe('Only this kind of unit'),
    },
  },
  ({ kind }) => {
    const kinds = kind === undefined ? Object.keys(UNITS) : [kind];
    return text(kinds.map((k) => `${k}: ${Object.keys(UNITS[k]).join(', ')}`).join('\n'));
  },
);

server.registerTool(
  'unit_info',
  {
    description: 'Say what a unit is and its kind.',
    inputSchema: { unit: z.enum(ALL).describe('The unit') },
  },
  ({ unit }) => text(`${unit}: ${NAMES[unit]}, a unit of ${kindOf(unit)}`),
);

await server.connect(new StdioServerTransport());
