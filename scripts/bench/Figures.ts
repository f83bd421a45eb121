/**
 * Figures: what a suite reports. A figure is the median of its rounds, with the min and
 * the max; a ratio compares two figures of the same run round by round (round i of A
 * over round i of B, the variants of a round run back to back), so a slow minute of a
 * shared machine weighs on both sides of it.
 */

export interface Figure {
  readonly name: string
  readonly unit: string
  readonly median: number
  readonly min: number
  readonly max: number
  /** One value per round. */
  readonly rounds: ReadonlyArray<number>
  /** What one round was, e.g. `50000 msgs`. */
  readonly note?: string
}

export interface Ratio {
  readonly name: string
  readonly median: number
  readonly min: number
  readonly max: number
  /** What a value above 1 means, e.g. `kit faster`. */
  readonly meaning: string
}

export interface SuiteResult {
  readonly suite: string
  readonly ratios: ReadonlyArray<Ratio>
  readonly figures: ReadonlyArray<Figure>
  /** How the suite measured, in a sentence or two each. */
  readonly notes: ReadonlyArray<string>
  /** Ratios for the quick summary line, by short name. */
  readonly headline: ReadonlyArray<readonly [string, number]>
}

export const median = (values: ReadonlyArray<number>): number => {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

/** The `p`-th percentile (0–100) of `sorted` (ascending), nearest rank. */
export const percentile = (sorted: ReadonlyArray<number>, p: number): number => {
  if (sorted.length === 0) return Number.NaN
  const rank = Math.ceil((p / 100) * sorted.length)
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!
}

export const figure = (name: string, unit: string, rounds: ReadonlyArray<number>, note?: string): Figure => ({
  name,
  unit,
  median: median(rounds),
  min: Math.min(...rounds),
  max: Math.max(...rounds),
  rounds,
  ...(note === undefined ? {} : { note })
})

/** `a / b` round by round; the median, min and max of those quotients. */
export const ratio = (name: string, a: Figure, b: Figure, meaning: string): Ratio => {
  const quotients = a.rounds.flatMap((x, i) => {
    const y = b.rounds[i]
    return y === undefined || y === 0 ? [] : [x / y]
  })
  return { name, median: median(quotients), min: Math.min(...quotients), max: Math.max(...quotients), meaning }
}

/** Rounds `value` to a few significant digits for a table. */
export const show = (value: number): string => {
  if (!Number.isFinite(value)) return "-"
  const abs = Math.abs(value)
  if (abs >= 100) return Math.round(value).toLocaleString("en-US")
  if (abs >= 10) return value.toFixed(1)
  if (abs >= 1) return value.toFixed(2)
  return value.toFixed(3)
}
