/**
 * The chat renderer's layout: whether stdout's line is still open, and
 * whether it is the character's streamed text, so that deltas continue that
 * line while every other line (a tool call, a note, an error) starts fresh.
 */
import type { Output } from './chat-text.js';

/** Lines for stdout and stderr, written in the order they are made. */
export class ChatLayout {
  /** stdout's cursor is not at the start of a line. */
  #midLine = false;
  /** The open line is the character's streamed text, so more deltas continue it. */
  #textOpen = false;

  /** Text for stdout as it is. */
  out(text: string): Output {
    if (text.length > 0) this.#midLine = !text.endsWith('\n');
    return { stream: 'stdout', text };
  }

  /** A whole line of its own on stdout, after closing any open one. */
  line(text: string): Output[] {
    const result = this.endLine();
    result.push(this.out(`${text}\n`));
    return result;
  }

  /** A whole line on stderr; stdout's open line is ended first so they do not run together. */
  errLine(text: string): Output[] {
    const result = this.endLine();
    result.push({ stream: 'stderr', text: `${text}\n` });
    return result;
  }

  /** Ends a half-written line. */
  endLine(): Output[] {
    this.#textOpen = false;
    return this.#midLine ? [this.out('\n')] : [];
  }

  /** Streamed text: continues the character's open line, or opens one under `speaker`. */
  text(delta: string, speaker: string): Output[] {
    if (delta === '') return [];
    if (this.#textOpen) return [this.out(delta)];
    const result = this.endLine();
    this.#textOpen = true;
    result.push(this.out(`${speaker} ${delta.replace(/^\s+/, '')}`));
    return result;
  }
}
