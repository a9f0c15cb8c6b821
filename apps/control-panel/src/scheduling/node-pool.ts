import { compareText } from './order.js';
import type { NodeView, PendingReason, Placement } from './types.js';

// The nodes new replicas may go to, indexed so one placement costs a heap
// operation rather than a scan of every node (the benchmark places 30,000
// replicas on 1,000 nodes). Order: fewest replicas of this service, then
// fewest allocations overall, then name. Services without constraints use a
// lazy min-heap over (load, name rank); a service with nodes or labels scans
// its own (cached) candidate list, which those constraints keep short.

export type Pick = { nodeId: string } | { reason: PendingReason };

export function isAvailable(node: NodeView): boolean {
  return node.state === 'live' && !node.cordoned && !node.decommissioned;
}

export function isUnconstrained(placement: Placement): boolean {
  return (placement.nodes?.length ?? 0) === 0 && Object.keys(placement.labels ?? {}).length === 0;
}

export function nameAllowed(node: NodeView, placement: Placement): boolean {
  const names = placement.nodes ?? [];
  return names.length === 0 || names.includes(node.name);
}

export function labelsMatch(node: NodeView, placement: Placement): boolean {
  for (const [key, value] of Object.entries(placement.labels ?? {})) {
    if (node.labels[key] !== value) return false;
  }
  return true;
}

export function fitsPlacement(node: NodeView, placement: Placement): boolean {
  return nameAllowed(node, placement) && labelsMatch(node, placement);
}

function placementKey(placement: Placement): string {
  const names = [...(placement.nodes ?? [])].sort();
  const labels = Object.entries(placement.labels ?? {}).sort(([a], [b]) => compareText(a, b));
  return JSON.stringify([names, labels]);
}

interface Candidates {
  ranks: number[];
  reason: PendingReason;
}

export class NodePool {
  /** Available nodes sorted by name; a node's rank is its index here. */
  private readonly nodes: NodeView[];
  private readonly rankOf = new Map<string, number>();
  private readonly loads: number[];
  private readonly heap: number[] = [];
  private readonly candidates = new Map<string, Candidates>();

  /** `load`: run allocations per node id, across every service. */
  constructor(all: readonly NodeView[], load: ReadonlyMap<string, number>) {
    this.nodes = all.filter(isAvailable).sort((a, b) => compareText(a.name, b.name));
    this.loads = this.nodes.map((node, rank) => {
      this.rankOf.set(node.id, rank);
      return load.get(node.id) ?? 0;
    });
    for (let rank = 0; rank < this.nodes.length; rank++) this.push(rank);
  }

  /**
   * The node for one more replica, whose load it then carries; `onNode`
   * counts the service's replicas per node id.
   */
  pick(placement: Placement, onNode: ReadonlyMap<string, number>): Pick {
    const rank = isUnconstrained(placement) ? this.pickAny(onNode) : this.pickAmong(this.candidatesFor(placement), onNode);
    if (typeof rank !== 'number') return rank;
    this.loads[rank]! += 1;
    this.push(rank);
    return { nodeId: this.nodes[rank]!.id };
  }

  /** One more (delta 1) or one fewer (-1) allocation on a node; unavailable nodes are ignored. */
  adjust(nodeId: string, delta: number): void {
    const rank = this.rankOf.get(nodeId);
    if (rank === undefined) return;
    this.loads[rank]! += delta;
    this.push(rank);
  }

  private key(rank: number): number {
    return this.loads[rank]! * this.nodes.length + rank;
  }

  // A node whose load changed gets a new heap entry; the old one is dropped
  // when popped because its load no longer matches (lazy deletion).
  private push(rank: number): void {
    const heap = this.heap;
    let i = heap.push(this.key(rank)) - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (heap[parent]! <= heap[i]!) break;
      [heap[parent], heap[i]] = [heap[i]!, heap[parent]!];
      i = parent;
    }
  }

  private pop(): number | undefined {
    const heap = this.heap;
    const top = heap[0];
    const last = heap.pop();
    if (heap.length > 0 && last !== undefined) {
      heap[0] = last;
      let i = 0;
      for (;;) {
        const left = 2 * i + 1;
        const right = left + 1;
        let least = i;
        if (left < heap.length && heap[left]! < heap[least]!) least = left;
        if (right < heap.length && heap[right]! < heap[least]!) least = right;
        if (least === i) break;
        [heap[least], heap[i]] = [heap[i]!, heap[least]!];
        i = least;
      }
    }
    return top;
  }

  private pickAny(onNode: ReadonlyMap<string, number>): number | { reason: PendingReason } {
    if (this.nodes.length === 0) return { reason: 'NO_NODE_AVAILABLE' };
    const count = this.nodes.length;
    const skipped = new Set<number>();
    let chosen: number | undefined;
    for (let key = this.pop(); key !== undefined; key = this.pop()) {
      const rank = key % count;
      if (Math.floor(key / count) !== this.loads[rank] || skipped.has(rank)) continue;
      if ((onNode.get(this.nodes[rank]!.id) ?? 0) === 0) {
        chosen = rank;
        break;
      }
      skipped.add(rank);
    }
    for (const rank of skipped) this.push(rank);
    // Every node already runs a replica of the service (replicas > nodes): spread the rest evenly.
    return chosen ?? this.pickAmong({ ranks: this.nodes.map((_, rank) => rank), reason: 'NO_NODE_AVAILABLE' }, onNode);
  }

  private pickAmong(candidates: Candidates, onNode: ReadonlyMap<string, number>): number | { reason: PendingReason } {
    let best: number | undefined;
    let bestOwn = 0;
    for (const rank of candidates.ranks) {
      const own = onNode.get(this.nodes[rank]!.id) ?? 0;
      if (best === undefined || own < bestOwn || (own === bestOwn && this.loads[rank]! < this.loads[best]!)) {
        best = rank;
        bestOwn = own;
      }
    }
    return best ?? { reason: candidates.reason };
  }

  private candidatesFor(placement: Placement): Candidates {
    const key = placementKey(placement);
    let found = this.candidates.get(key);
    if (!found) {
      const named = this.nodes.map((node, rank) => ({ node, rank })).filter(({ node }) => nameAllowed(node, placement));
      const ranks = named.filter(({ node }) => labelsMatch(node, placement)).map(({ rank }) => rank);
      found = { ranks, reason: named.length === 0 ? 'NO_NODE_AVAILABLE' : 'NO_NODE_MATCHES_LABELS' };
      this.candidates.set(key, found);
    }
    return found;
  }
}
