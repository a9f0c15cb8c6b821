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
}
