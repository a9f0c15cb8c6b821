import type { Static, TObject } from 'typebox';
import { Compile } from 'typebox/compile';
import { CodedError, defineErrorCatalog } from './errors.js';

export const CONFIG_ERROR_CATALOG = defineErrorCatalog({
  INVALID_CONFIG: 'the environment names a value that cannot be used (every problem is listed)',
});

/** Configuration that cannot be used; names every bad variable. */
export class ConfigError extends CodedError<'INVALID_CONFIG'> {
  constructor(readonly problems: string[]) {
    super('INVALID_CONFIG', `invalid configuration:\n  ${problems.join('\n  ')}`);
  }
}

/**
 * Reads the variables a TypeBox object schema names from an environment,
 * converts whole numbers, applies defaults and validates. Empty strings count
 * as unset. Throws `ConfigError` listing every problem at once.
 */
export function parseEnv<T extends TObject>(schema: T, env: Record<string, string | undefined>): Static<T> {
  const validator = Compile(schema);
  const problems: string[] = [];
  const raw: Record<string, unknown> = {};
  for (const [key, property] of Object.entries(schema.properties)) {
    const value = env[key];
    if (value === undefined || value === '') continue;
    if ((property as { type?: string }).type === 'integer') {
      if (!/^\d+$/.test(value.trim())) {
        problems.push(`${key}=${JSON.stringify(value)}: expected a whole number`);
        continue;
      }
      raw[key] = Number(value.trim());
    } else {
      raw[key] = value;
    }
  }
  const parsed = validator.Default(raw);
  if (problems.length === 0 && !validator.Check(parsed)) {
    for (const error of validator.Errors(parsed)) {
      const key = error.instancePath.replace(/^\//, '');
      if (key) problems.push(`${key}=${JSON.stringify(raw[key])}: ${error.message}`);
      else {
        const missing = (error.params as { requiredProperties?: string[] }).requiredProperties ?? [];
        problems.push(`${missing.join(', ') || 'environment'}: ${missing.length ? 'required' : error.message}`);
      }
    }
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return parsed as Static<T>;
}
