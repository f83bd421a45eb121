import { printable } from "../adapters/logging/TerminalText.js"

/** `rows` under `headers`, in columns two spaces apart; cells over `maxCell` characters are cut with `…`. */
export const table = (
  headers: ReadonlyArray<string>,
  rows: ReadonlyArray<ReadonlyArray<string>>,
  maxCell = 80
): string => {
  const cut = (cell: string) => (cell.length > maxCell ? `${cell.slice(0, maxCell - 1)}…` : cell).replace(/\s+/g, " ")
  const cells = [headers, ...rows].map((row) => row.map(cut))
  const widths = headers.map((_, i) => Math.max(...cells.map((row) => row[i]?.length ?? 0)))
  return cells.map((row) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]!))).join("  "))
    .join("\n")
}

/** How long ago `ms` was, at `nowMs`, in the largest fitting unit: `42s`, `5m`, `3h`, `2d`; `-` when unknown. */
export const formatAge = (ms: number | null, nowMs: number): string => {
  if (ms === null) return "-"
  const seconds = Math.max(0, Math.round((nowMs - ms) / 1000))
  return seconds < 120
    ? `${seconds}s`
    : seconds < 7200
    ? `${Math.round(seconds / 60)}m`
    : seconds < 172_800
    ? `${Math.round(seconds / 3600)}h`
    : `${Math.round(seconds / 86_400)}d`
}

/** Ids printed in full before a list is summarised: a move of 50,000 letters prints counts, not 50,000 ids. */
const MaxListedIds = 20

/** `ids` for a terminal: each escaped (`printable`), at most `MaxListedIds` of them, then how many more. */
export const idList = (ids: ReadonlyArray<string>): string =>
  ids.length <= MaxListedIds
    ? ids.map(printable).join(", ")
    : `${ids.slice(0, MaxListedIds).map(printable).join(", ")} and ${ids.length - MaxListedIds} more`
