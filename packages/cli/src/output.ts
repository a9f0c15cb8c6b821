// Human output by default, JSON for scripts (--json). Everything goes through
// an Output so tests and commands never write to process streams directly.

export interface Output {
  json: boolean;
  /** A line for people (stdout); nothing with --json. */
  say(line: string): void;
  /** A JSON document (stdout), one line; only with --json. */
  data(value: unknown): void;
  /** Diagnostics (stderr), in both modes. */
  warn(line: string): void;
}

export function createOutput(json: boolean, out: NodeJS.WritableStream = process.stdout, err: NodeJS.WritableStream = process.stderr): Output {
  return {
    json,
    say: (line) => {
      if (!json) out.write(`${line}\n`);
    },
    data: (value) => {
      if (json) out.write(`${JSON.stringify(value)}\n`);
    },
    warn: (line) => void err.write(`${line}\n`),
  };
}

/** Left-aligned columns, two spaces apart. */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}
