import { Deadline, systemDeadlineClock, type DeadlineClock, type Logger } from '@tether/common';

// Self-fencing (capability workload.fence, issue 38): the agent stops the
// containers of fenced releases once TETHER_FENCE_AFTER_MS has passed since
// the last valid frame it received from any panel (a welcome, a ping, an ACK,
// any frame), counted on the monotonic clock from the agent's start. While
// fenced, a frame on a session that was open before the fence is not taken:
// the socket is dropped so the next intent comes from a fresh session, whose
// panel proved its claim before its welcome; the fence lifts only when that
// session's complete set (`allocations`, or `workloads` from a panel without
// allocations) arrives, and the set then says what runs. A frozen agent runs
// no timer and cannot fence (docs/architecture.md, "Failover").

export interface PanelFenceOptions {
  /** TETHER_FENCE_AFTER_MS. */
  afterMs: number;
  /** Stops (true) or lets run again (false) the fenced containers: WorkloadController.setFenced. */
  setFenced(fenced: boolean): void;
  logger: Logger;
  clock?: DeadlineClock;
}

export class PanelFence {
  private deadline: Deadline | undefined;
  /** When the fence fell (monotonic ms), null while not fenced. */
  private fencedAt: number | null = null;
  private readonly clock: DeadlineClock;

  constructor(private readonly options: PanelFenceOptions) {
    this.clock = options.clock ?? systemDeadlineClock;
  }

  get fenced(): boolean {
    return this.fencedAt !== null;
  }

  /** The monotonic time a socket opens at (heard() compares it with the fence). */
  now(): number {
    return this.clock.now();
  }

  /** Counting starts with the agent: no frame heard yet. */
  start(): void {
    this.arm();
  }

  stop(): void {
    this.deadline?.cancel();
    this.deadline = undefined;
  }

  /**
   * A valid frame from a panel arrived on a socket opened at `socketOpenedAt`. False: the socket was open before
   * the fence fell, and the frame must not be taken (the caller drops the socket for a fresh session).
   */
  heard(socketOpenedAt: number): boolean {
    if (this.fencedAt === null) {
      this.deadline?.touch();
      return true;
    }
    return socketOpenedAt > this.fencedAt;
  }

  /** A complete set from a session opened after the fence: the fence lifts, and counting starts again now. */
  freshSet(): void {
    if (this.fencedAt === null) return;
    this.fencedAt = null;
    this.options.setFenced(false);
    this.arm();
  }

  private arm(): void {
    this.deadline?.cancel();
    this.deadline = new Deadline({ timeoutMs: this.options.afterMs, clock: this.clock, onExpire: (silentMs) => this.fence(silentMs) });
  }

  private fence(silentMs: number): void {
    this.fencedAt = this.clock.now();
    this.options.logger.warn({ fenceAfterMs: this.options.afterMs, silentForMs: Math.floor(silentMs) }, 'no frame from any panel for the fence deadline: fencing');
    this.options.setFenced(true);
  }
}
