import type { Logger } from '@tether/common';
import { rename } from 'node:fs/promises';
import Type, { type Static } from 'typebox';
import { Compile } from 'typebox/compile';
import { CanaryDropCounts, type CanaryDropCause, type CanaryStatus } from '@tether/protocol';
import { readFileIfExists, writeFileAtomic } from '../state/atomic-file.js';

// The canary's counters across agent restarts (TETHER_STATE_DIR/
// canary-state.json), like the reload counters in routing-state.json:
// written atomically when a drop or a failed probe is counted, never per probe.

const NullableString = Type.Union([Type.String(), Type.Null()]);
const Persisted = Type.Object({
  version: Type.Literal(1),
  dropsTotal: Type.Integer({ minimum: 0 }),
  /** UTC day (YYYY-MM-DD) the `today` counts are of; another day reads as zero. */
  day: NullableString,
  dropsToday: Type.Integer({ minimum: 0 }),
  causesTotal: CanaryDropCounts,
  causesToday: CanaryDropCounts,
  lastDropAt: NullableString,
  lastDropCause: NullableString,
  httpFailuresTotal: Type.Integer({ minimum: 0 }),
});
type Persisted = Static<typeof Persisted>;
const validate = Compile(Persisted);

const zero = (): CanaryDropCounts => ({ reload: 0, proxyRestarted: 0, proxyUnreachable: 0, unexplained: 0 });
const fresh = (): Persisted => ({
  version: 1,
  dropsTotal: 0,
  day: null,
  dropsToday: 0,
  causesTotal: zero(),
  causesToday: zero(),
  lastDropAt: null,
  lastDropCause: null,
  httpFailuresTotal: 0,
});
const causeKey = { reload: 'reload', 'proxy-restarted': 'proxyRestarted', 'proxy-unreachable': 'proxyUnreachable', unexplained: 'unexplained' } as const;
const utcDay = (at: Date) => at.toISOString().slice(0, 10);

export class CanaryStateStore {
  private writing: Promise<void> = Promise.resolve();

  private constructor(
    private readonly file: string,
    private state: Persisted,
    private readonly now: () => Date,
    private readonly logger: Logger,
  ) {}

  static async open(file: string, options: { now: () => Date; logger: Logger }): Promise<CanaryStateStore> {
    const bytes = await readFileIfExists(file);
    let parsed: unknown;
    try {
      parsed = bytes === null ? undefined : JSON.parse(bytes.toString('utf8'));
    } catch {
      parsed = undefined;
    }
    if (bytes === null || validate.Check(parsed)) return new CanaryStateStore(file, bytes === null ? fresh() : (parsed as Persisted), options.now, options.logger);
    const aside = `${file}.unreadable-${Date.now()}`;
    await rename(file, aside);
    options.logger.error({ file, aside }, 'canary state file unreadable; set aside, canary counters start from zero');
    return new CanaryStateStore(file, fresh(), options.now, options.logger);
  }

  status(connected: boolean): CanaryStatus {
    const s = this.state;
    const today = s.day === utcDay(this.now());
    return {
      connected,
      dropsToday: today ? s.dropsToday : 0,
      dropsTotal: s.dropsTotal,
      causesTotal: { ...s.causesTotal },
      causesToday: today ? { ...s.causesToday } : zero(),
      lastDropAt: s.lastDropAt,
      lastDropCause: s.lastDropCause,
      httpFailuresTotal: s.httpFailuresTotal,
    };
  }

  recordDrop(at: Date, cause: CanaryDropCause, reloadReason: string | null): Promise<void> {
    const s = this.state;
    const day = utcDay(at);
    const sameDay = s.day === day;
    const causesToday = sameDay ? { ...s.causesToday } : zero();
    causesToday[causeKey[cause]] += 1;
    const causesTotal = { ...s.causesTotal };
    causesTotal[causeKey[cause]] += 1;
    this.state = {
      ...s,
      dropsTotal: s.dropsTotal + 1,
      day,
      dropsToday: (sameDay ? s.dropsToday : 0) + 1,
      causesTotal,
      causesToday,
      lastDropAt: at.toISOString(),
      lastDropCause: (reloadReason === null ? cause : `${cause}: ${reloadReason}`).slice(0, 4096),
    };
    return this.save();
  }

  recordHttpFailure(): Promise<void> {
    this.state = { ...this.state, httpFailuresTotal: this.state.httpFailuresTotal + 1 };
    return this.save();
  }

  private save(): Promise<void> {
    const snapshot = this.state;
    this.writing = this.writing
      .then(() => writeFileAtomic(this.file, `${JSON.stringify(snapshot)}\n`, 0o600))
      .catch((error: unknown) => this.logger.error({ err: error, file: this.file }, 'could not persist canary counters'));
    return this.writing;
  }
}
