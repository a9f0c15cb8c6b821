import { pino, type DestinationStream, type Logger as PinoLogger } from 'pino';
import pinoPretty from 'pino-pretty';
import Type from 'typebox';

// How both apps make their pino logger (a subpath, @tether/common/logging, so
// the CLI's bundle never carries pino). JSON lines are for machines (a log
// shipper, `docker logs | jq`); a person at a terminal gets one readable line
// per event from pino-pretty, written synchronously on the same stdout so
// log lines and console.log banners keep their order.

export const LOG_FORMATS = ['auto', 'pretty', 'json'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

/** The TETHER_LOG_FORMAT schema both apps' config.ts use (default `auto`). */
export const LogFormatSchema = Type.Union(
  LOG_FORMATS.map((f) => Type.Literal(f)),
  { default: 'auto' },
);

/** `auto` is pretty only when the output is a terminal. */
export function resolveLogFormat(format: LogFormat, isTerminal: boolean): 'pretty' | 'json' {
  return format === 'auto' ? (isTerminal ? 'pretty' : 'json') : format;
}

export interface LoggerOptions {
  level: string;
  format: LogFormat;
  /** Where lines go: stdout when absent. */
  destination?: DestinationStream & { isTTY?: boolean };
}

/** The app's root logger: pino, JSON or pretty as `format` and the destination's terminal say. */
export function createLogger(options: LoggerOptions): PinoLogger {
  const out = options.destination ?? process.stdout;
  const isTerminal = out.isTTY === true;
  if (resolveLogFormat(options.format, isTerminal) === 'json') return pino({ level: options.level }, out);
  const pretty = pinoPretty({
    destination: out,
    sync: true,
    // Colours only for a real terminal (a launcher's pipe asked for pretty text, not escape codes).
    colorize: isTerminal,
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname',
    singleLine: true,
  });
  return pino({ level: options.level }, pretty);
}
