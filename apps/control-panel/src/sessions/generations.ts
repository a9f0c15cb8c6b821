// The generation each live session of this panel claimed (several panels on
// one database: cluster/cluster.ts sets it when the claim commits, before
// `welcome`). Made first and handed to both sides, so the registry, which
// fences its session facts with it, needs no back-reference to the cluster.
// A lone panel claims nothing: every lookup is undefined.

export class SessionGenerations {
  private readonly bySession = new Map<string, number>();

  get(sessionId: string): number | undefined {
    return this.bySession.get(sessionId);
  }

  set(sessionId: string, generation: number): void {
    this.bySession.set(sessionId, generation);
  }

  delete(sessionId: string): void {
    this.bySession.delete(sessionId);
  }

  /** The highest generation this panel holds (0: none): its share of the fencing floor after a failover. */
  highest(): number {
    let max = 0;
    for (const g of this.bySession.values()) if (g > max) max = g;
    return max;
  }
}
