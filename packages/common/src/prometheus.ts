// prom-client's default metrics include three gauges whose names end in
// `_total` (`nodejs_active_{handles,requests,resources}_total`), which the
// Prometheus conventions keep for counters: `promtool check metrics` refuses
// them. The same values are the sum of the per-type gauges that stay
// (`sum(<prefix>nodejs_active_handles)`), so both apps drop them.

/** Default-metric names (without prefix) that break the conventions. */
export const NON_CONVENTIONAL_DEFAULT_METRICS: readonly string[] = [
  'nodejs_active_handles_total',
  'nodejs_active_requests_total',
  'nodejs_active_resources_total',
];

/** Removes the non-conventional default metrics from a prom-client registry (after collectDefaultMetrics). */
export function dropNonConventionalDefaults(registry: { removeSingleMetric(name: string): void }, prefix: string): void {
  for (const name of NON_CONVENTIONAL_DEFAULT_METRICS) registry.removeSingleMetric(`${prefix}${name}`);
}
