/**
 * RoundClock: what one round of an in-process variant measured: messages per second over
 * its window, and the bench process's CPU time (user + system, `process.cpuUsage`) over
 * the same window per message, which a busy shared machine does not inflate the way it
 * inflates wall time.
 */

export interface RoundResult {
  readonly rate: number
  /** µs of this process's CPU per message. */
  readonly cpuUs: number
}

/** A point in time: wall clock (ms) and this process's CPU usage. */
export interface Mark {
  readonly at: number
  readonly cpu: NodeJS.CpuUsage
}

export const mark = (): Mark => ({ at: Date.now(), cpu: process.cpuUsage() })

export const resultOf = (count: number, from: Mark, to: Mark = mark()): RoundResult => {
  const cpuUs = to.cpu.user - from.cpu.user + (to.cpu.system - from.cpu.system)
  return { rate: count / (Math.max(1, to.at - from.at) / 1000), cpuUs: cpuUs / count }
}
