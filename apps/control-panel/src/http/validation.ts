import AjvCompiler from '@fastify/ajv-compiler';
import type { FastifyServerOptions } from 'fastify';

// Request validation with two strictness levels. JSON bodies are validated as
// sent: "5" is not a number, and unknown fields are refused, not dropped.
// Query strings and path parameters only ever arrive as strings, so there
// numbers and booleans are converted before validation (?limit=20 passes an
// integer schema). Defaults from the schemas are applied in both.

const BASE = { removeAdditional: false, useDefaults: true, allErrors: false } as const;

/** Keeps Fastify's `ajv.plugins` / `ajv.onCreate` options (ajv-formats is added by the compiler itself). */
const pluginsOf = (options: { plugins?: unknown; onCreate?: unknown } | undefined) =>
  ({ ...(options?.plugins ? { plugins: options.plugins } : {}), ...(options?.onCreate ? { onCreate: options.onCreate } : {}) }) as {
    plugins?: never;
    onCreate?: never;
  };

export function partAwareSchemaController(): NonNullable<FastifyServerOptions['schemaController']> {
  const pool = AjvCompiler();
  return {
    compilersFactory: {
      buildValidator(externalSchemas, serverOptions) {
        const strict = pool(externalSchemas, { ...pluginsOf(serverOptions), customOptions: { ...BASE, coerceTypes: false } });
        const coercing = pool(externalSchemas, { ...pluginsOf(serverOptions), customOptions: { ...BASE, coerceTypes: true } });
        return (route) => (route.httpPart === 'body' ? strict(route) : coercing(route));
      },
    },
  };
}
