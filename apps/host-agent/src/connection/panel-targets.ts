// Where the agent connects: the panel URLs it was given, taken in a shuffled
// round so a fleet restarting at once spreads over several panels, and the
// WebSocket URL of each.

export function agentConnectUrl(panelUrl: string): string {
  const url = new URL(panelUrl);
  url.protocol = url.protocol === 'https:' || url.protocol === 'wss:' ? 'wss:' : 'ws:';
  url.pathname = `${url.pathname.replace(/\/$/, '')}/v1/agent/connect`;
  return url.toString();
}

export class PanelTargets {
  private readonly urls: readonly string[];
  /** Panels still to try in this round; reshuffled when empty. */
  private untried: string[] = [];

  constructor(
    panelUrl: string | readonly string[],
    private readonly random: () => number = Math.random,
  ) {
    this.urls = typeof panelUrl === 'string' ? [panelUrl] : [...panelUrl];
    if (this.urls.length === 0) throw new Error('no panel URL');
  }

  /** The next panel of a shuffled round (Fisher–Yates with the connection's random source). */
  next(): string {
    if (this.untried.length === 0) {
      const order = [...this.urls];
      for (let i = order.length - 1; i > 0; i--) {
        const j = Math.floor(this.random() * (i + 1));
        [order[i], order[j]] = [order[j]!, order[i]!];
      }
      this.untried = order;
    }
    return this.untried.shift()!;
  }
}
