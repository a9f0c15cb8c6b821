import { spawnSync } from 'node:child_process';

// Reading Prometheus artefacts in tests: the metric names a text exposition
// carries, the metric names a PromQL expression uses, and promtool runs.

/** Every sample name in a text exposition (histograms give their _bucket/_sum/_count names). */
export function exposedNames(text: string): Set<string> {
  const names = new Set<string>();
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]/.exec(line);
    if (m) names.add(m[1]!);
  }
  return names;
}

// Functions, aggregations, keywords and modifiers: identifiers in PromQL that are not metric names.
const NOT_METRICS = new Set(
  [
    'sum', 'min', 'max', 'avg', 'count', 'stddev', 'stdvar', 'topk', 'bottomk', 'quantile', 'count_values', 'group',
    'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'and', 'or', 'unless', 'bool', 'offset',
    'rate', 'irate', 'increase', 'delta', 'idelta', 'deriv', 'histogram_quantile', 'abs', 'absent', 'clamp_min', 'clamp_max',
    'max_over_time', 'min_over_time', 'avg_over_time', 'sum_over_time', 'count_over_time', 'last_over_time', 'changes', 'resets',
    'time', 'vector', 'scalar', 'label_replace', 'label_join', 'round', 'ceil', 'floor', 'sort', 'sort_desc', 'inf', 'nan',
  ],
);

/** The metric names a PromQL expression reads. */
export function metricNamesIn(expr: string): string[] {
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""') // label values
    .replace(/\{[^}]*\}/g, '') // label matchers
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, '$1') // label lists
    .replace(/\[[^\]]*\]/g, ''); // ranges
  const names = new Set<string>();
  for (const m of stripped.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    const word = m[0];
    const after = stripped.slice(m.index! + word.length).trimStart();
    if (NOT_METRICS.has(word) || after.startsWith('(')) continue;
    // A number's exponent or unit, e.g. the "e" of 1e3, never starts a word after a digit.
    if (m.index! > 0 && /[0-9.]/.test(stripped[m.index! - 1]!)) continue;
    names.add(word);
  }
  return [...names];
}

/** Runs promtool; resolves with its exit status and output. */
export function promtool(args: string[], input?: string, cwd?: string): { status: number; output: string } {
  const r = spawnSync('promtool', args, { input, cwd, encoding: 'utf8', timeout: 60_000 });
  return { status: r.status ?? 1, output: `${r.stdout ?? ''}${r.stderr ?? ''}` };
}
