/**
 * SeededRandom: a small deterministic generator (mulberry32) so that one printed seed
 * replays the same workload and the same fault plan (`npm run chaos -- --seed N`).
 * Timing still varies from run to run; what the seed fixes is every random choice.
 */
export class SeededRandom {
  private state: number

  constructor(readonly seed: number) {
    this.state = seed >>> 0
  }

  /** A float in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0
    let t = this.state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }

  /** An integer in [min, max], both included. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1))
  }

  /** A float in [min, max). */
  between(min: number, max: number): number {
    return min + this.next() * (max - min)
  }

  chance(p: number): boolean {
    return this.next() < p
  }

  pick<A>(items: ReadonlyArray<A>): A {
    if (items.length === 0) throw new Error("pick from an empty list")
    return items[Math.floor(this.next() * items.length)]!
  }

  shuffle<A>(items: ReadonlyArray<A>): Array<A> {
    const out = [...items]
    for (let i = out.length - 1; i > 0; i--) {
      const j = Math.floor(this.next() * (i + 1))
      ;[out[i], out[j]] = [out[j]!, out[i]!]
    }
    return out
  }

  /** An independent generator for one part of the run (workload, faults, a client), so adding draws to one part does not shift the others. */
  fork(label: string): SeededRandom {
    let h = this.seed ^ 0x9e3779b9
    for (const c of label) h = Math.imul(h ^ c.charCodeAt(0), 0x85ebca6b) >>> 0
    return new SeededRandom(h >>> 0)
  }
}
