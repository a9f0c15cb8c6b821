import type { Logger } from '@tether/common';
import { rename } from 'node:fs/promises';
import Type from 'typebox';
import { Compile } from 'typebox/compile';
import { CanaryDropEvent, ReloadEvent } from '@tether/protocol';
import { readFileIfExists, writeFileAtomic } from '../state/atomic-file.js';

// Reload and canary-drop events on their way to the panel, each recorded
// there exactly once. Every event gets this agent process's boot epoch and
// the next sequence number of the boot: the panel stores it under that key,
// so a resend (another session, a lost ACK) is stored once. Events stay here,
// persisted in TETHER_STATE_DIR/proxy-events.json, until the panel ACKs them,
// so neither a dropped session nor an agent restart loses one.

export type JournalEvent = ReloadEvent | CanaryDropEvent;
/** An event as its source describes it; the journal adds the key. */
export type NewJournalEvent = Omit<ReloadEvent, 'epoch' | 'seq'> | Omit<CanaryDropEvent, 'epoch' | 'seq'>;

const File = Type.Object({ version: Type.Literal(1), pending: Type.Array(Type.Union([ReloadEvent, CanaryDropEvent])) });
const validate = Compile(File);

/** Beyond this many unACKed events (a panel gone for days) the oldest go first; counters still count them. */
const DEFAULT_LIMIT = 1_000;

/** The journal entry of a reload the routing controller made. */
export function reloadEvent(r: { kind: ReloadEvent['kind']; reason: string; at: Date; hashBefore: string | null; hashAfter: string }): NewJournalEvent {
  return { event: 'reload', at: r.at.toISOString(), kind: r.kind, hashBefore: r.hashBefore, hashAfter: r.hashAfter, reason: r.reason.slice(0, 4096) };
}

export const eventKey = (e: Pick<JournalEvent, 'epoch' | 'seq'>) => `${e.epoch}:${e.seq}`;

export class EventJournal {
  private pendingEvents: JournalEvent[] = [];
  private seq = 0;
  private readonly listeners = new Set<() => void>();
  /** Writes in order; the last one holds everything. */
  private writing: Promise<void> = Promise.resolve();

  private constructor(
    private readonly file: string,
    readonly epoch: number,
    private readonly logger: Logger,
    private readonly limit: number,
  ) {}

  /** Loads the events a previous run left unACKed (they keep their own epoch and seq). */
  static async open(file: string, options: { logger: Logger; epoch?: number; limit?: number }): Promise<EventJournal> {
    const journal = new EventJournal(file, options.epoch ?? Date.now(), options.logger, options.limit ?? DEFAULT_LIMIT);
    const bytes = await readFileIfExists(file);
    if (bytes === null) return journal;
    let parsed: unknown;
    try {
      parsed = JSON.parse(bytes.toString('utf8'));
    } catch {
      parsed = undefined;
    }
    if (validate.Check(parsed)) {
      journal.pendingEvents = parsed.pending;
    } else {
      const aside = `${file}.unreadable-${Date.now()}`;
      await rename(file, aside);
      options.logger.error({ file, aside }, 'proxy event journal unreadable; set aside');
    }
    return journal;
  }

  /** Adds an event with its key; persisted before listeners hear of it. */
  async record(event: NewJournalEvent): Promise<JournalEvent> {
    const keyed = { ...event, epoch: this.epoch, seq: this.seq++ } as JournalEvent;
    this.pendingEvents.push(keyed);
    const over = this.pendingEvents.length - this.limit;
    if (over > 0) {
      this.pendingEvents.splice(0, over);
      this.logger.warn({ dropped: over }, 'proxy event journal full; oldest unACKed events dropped');
    }
    await this.persist();
    for (const listener of this.listeners) listener();
    return keyed;
  }

  /** Events not yet ACKed, oldest first. */
  pending(): readonly JournalEvent[] {
    return this.pendingEvents;
  }

  /** The panel stored these: forget them. */
  async acknowledge(keys: Iterable<string>): Promise<void> {
    const done = new Set(keys);
    const before = this.pendingEvents.length;
    this.pendingEvents = this.pendingEvents.filter((e) => !done.has(eventKey(e)));
    if (this.pendingEvents.length !== before) await this.persist();
  }

  /** Called after each recorded event (the session sends it). Returns what unsubscribes. */
  onRecorded(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Waits for the writes started so far. */
  flushed(): Promise<void> {
    return this.writing;
  }

  private persist(): Promise<void> {
    this.writing = this.writing
      .then(() => writeFileAtomic(this.file, `${JSON.stringify({ version: 1, pending: this.pendingEvents })}\n`, 0o600))
      .catch((error: unknown) => {
        // In memory the events are still there and still sent; only an agent restart could lose them now.
        this.logger.error({ err: error, file: this.file }, 'could not persist proxy events');
      });
    return this.writing;
  }
}
