import type { Logger } from '@tether/common';
import { readFileIfExists, writeFileAtomic } from './atomic-file.js';

/**
 * One JSON file of the agent's state directory that a book reads at start and rewrites as it changes:
 * reads tolerate a missing or unreadable file (logged, then null: the book starts empty), writes are
 * atomic, serialised (the last one wins on disk) and never throw (a failed one is logged).
 */
export class JsonStateFile {
  private writing: Promise<void> = Promise.resolve();

  constructor(private readonly file: string, private readonly logger: Logger, private readonly what: string) {}

  async read(): Promise<unknown> {
    const bytes = await readFileIfExists(this.file).catch(() => null);
    if (bytes === null) return null;
    try {
      return JSON.parse(bytes.toString('utf8')) as unknown;
    } catch (error) {
      this.logger.error({ err: error, file: this.file }, `${this.what} unreadable; starting without it`);
      return null;
    }
  }

  /** Resolves once this and every earlier write are on disk (or logged as failed). */
  write(value: unknown): Promise<void> {
    const data = `${JSON.stringify(value)}\n`;
    this.writing = this.writing
      .then(() => writeFileAtomic(this.file, data, 0o600))
      .catch((error: unknown) => this.logger.error({ err: error, file: this.file }, `could not persist ${this.what}`));
    return this.writing;
  }

  /** Waits for the writes started so far. */
  flushed(): Promise<void> {
    return this.writing;
  }
}
