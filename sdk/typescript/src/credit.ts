// Credit split by demand: how a worker with one stream per node shares its free slots
// (the rules of docs/cluster.md, "How workers reach shards", as the Python SDK's
// scheduler/worker/_credit_split.py):
// 1. never more credit granted in total than free slots;
// 2. at least one credit on every stream while there are slots for it;
// 3. each other free slot to the stream whose node reported the most waiting work
//    (Backlog) not covered by its credit; ties: least credit, then oldest stream;
// 4. what no backlog asks for goes only to streams whose node reports no backlogs.
// Pure bookkeeping: every change answers the new grants as stream -> credit.

interface Share {
  granted: number;
  waiting: number;
  order: number;
  reports: boolean;
}

export class CreditSplit {
  private busy = 0;
  private readonly shares = new Map<string, Share>();
  private opened = 0;

  constructor(readonly capacity: number) {
    if (capacity < 1) throw new RangeError("capacity must be at least 1");
  }

  granted(stream: string): number {
    return this.shares.get(stream)?.granted ?? 0;
  }
  totalGranted(): number {
    let n = 0;
    for (const s of this.shares.values()) n += s.granted;
    return n;
  }
  free(): number {
    return this.capacity - this.busy;
  }
  streams(): string[] {
    return [...this.shares.keys()].sort((a, b) => this.shares.get(a)!.order - this.shares.get(b)!.order);
  }

  open(stream: string, reports = false): Map<string, number> {
    let share = this.shares.get(stream);
    if (!share) {
      share = { granted: 0, waiting: 0, order: ++this.opened, reports };
      this.shares.set(stream, share);
    }
    share.reports = reports;
    return this.fill();
  }
  close(stream: string): Map<string, number> {
    this.shares.delete(stream);
    return this.fill();
  }
  pushed(stream: string, tasks = 1): void {
    const share = this.shares.get(stream);
    if (share) {
      share.granted -= Math.min(tasks, share.granted);
      share.waiting = Math.max(0, share.waiting - tasks);
    }
    this.busy = Math.min(this.capacity, this.busy + tasks);
  }
  finished(tasks = 1): Map<string, number> {
    this.busy = Math.max(0, this.busy - tasks);
    return this.fill();
  }
  backlog(stream: string, waiting: number): Map<string, number> {
    const share = this.shares.get(stream);
    if (share) share.waiting = Math.max(0, waiting);
    return this.fill();
  }

  private fill(): Map<string, number> {
    let spare = this.free() - this.totalGranted();
    const grants = new Map<string, number>();
    if (spare <= 0 || this.shares.size === 0) return grants;
    const ordered = this.streams();
    for (const name of ordered) {
      if (spare === 0) return grants;
      const share = this.shares.get(name)!;
      if (share.granted === 0) {
        share.granted = 1;
        grants.set(name, 1);
        spare -= 1;
      }
    }
    while (spare > 0) {
      let best: string | undefined;
      let bestKey: [number, number, number] | undefined;
      for (const name of ordered) {
        const s = this.shares.get(name)!;
        if (s.reports && s.waiting <= s.granted) continue;
        const key: [number, number, number] = [-(s.waiting - s.granted), s.granted, s.order];
        if (!bestKey || key[0] < bestKey[0] || (key[0] === bestKey[0] && (key[1] < bestKey[1] || (key[1] === bestKey[1] && key[2] < bestKey[2])))) {
          best = name;
          bestKey = key;
        }
      }
      if (best === undefined) return grants;
      this.shares.get(best)!.granted += 1;
      grants.set(best, (grants.get(best) ?? 0) + 1);
      spare -= 1;
    }
    return grants;
  }
}
