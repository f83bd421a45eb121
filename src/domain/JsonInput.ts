import { Either } from "effect"

/**
 * The deepest nesting of arrays and objects the kit accepts in any JSON it is given, on
 * either door (an HTTP body, a message body). Its own documents are one level deep; the
 * bound exists so that no input can make a decoder or an error formatter recurse
 * without limit (Schema's formatters and `JSON.stringify` are recursive; `JSON.parse`
 * in V8 is not).
 */
export const MaxJsonDepth = 32

/**
 * The most members (object keys, or array elements) any one object or array of an input
 * may have. The kit's documents have a handful; the bound lets a refusal of a body with
 * hundreds of thousands of keys cost one linear scan instead of building them all.
 */
export const MaxJsonMembers = 1000

/** The longest text of one reported issue, in UTF-16 code units; longer ones are cut with `…`. */
export const MaxIssueLength = 300

/** How many issues a refusal lists before it says "and N more". */
export const MaxListedIssues = 20

/** Why a byte string is not a JSON document the kit will look at. */
export interface JsonRefusal {
  readonly reason: "invalid-utf8" | "invalid-json" | "too-deep" | "too-many-members"
  readonly message: string
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false })

/**
 * Decodes `bytes` as UTF-8 (RFC 3629), refusing any ill-formed sequence instead of
 * replacing it with U+FFFD: an overlong form, a lone continuation byte, a surrogate code
 * point, raw Latin-1. A UTF-8 byte order mark is dropped, as RFC 8259 §8.1 allows.
 */
export const decodeUtf8 = (bytes: Uint8Array): Either.Either<string, JsonRefusal> => {
  try {
    return Either.right(strictUtf8.decode(bytes))
  } catch {
    return Either.left({ reason: "invalid-utf8", message: "is not valid UTF-8" })
  }
}

/**
 * The nesting depth of a parsed JSON value, counted without recursion and given up as
 * soon as it passes `limit`: a scalar is 0, `[]` and `{}` are 1, `[[1]]` is 2. The walk
 * is linear in the value's size whatever its shape.
 */
export const depthExceeds = (value: unknown, limit: number): boolean => {
  const stack: Array<readonly [unknown, number]> = [[value, 0]]
  while (stack.length > 0) {
    const [current, depth] = stack.pop()!
    if (typeof current !== "object" || current === null) continue
    if (depth + 1 > limit) return true
    for (const child of Array.isArray(current) ? current : Object.values(current)) {
      if (typeof child === "object" && child !== null) stack.push([child, depth + 1])
    }
  }
  return false
}

/**
 * One pass over JSON text, before it is parsed, that finds the deepest nesting and the
 * largest object or array, giving up at the first that passes its bound. Strings are
 * skipped with their escapes; the text need not be valid JSON (the parser judges that).
 * Linear in the text, a few nanoseconds a character, and it allocates only its stack.
 */
export const scanShape = (
  text: string,
  maxDepth: number,
  maxMembers: number
): JsonRefusal | undefined => {
  // members[d] counts the commas seen in the container open at depth d.
  const members: Array<number> = []
  let depth = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 0x5c) i++ // backslash: skip the escaped character
      else if (c === 0x22) inString = false
    } else if (c === 0x22) {
      inString = true
    } else if (c === 0x7b || c === 0x5b) { // { [
      if (++depth > maxDepth) {
        return { reason: "too-deep", message: `nests arrays or objects deeper than ${maxDepth} levels` }
      }
      members[depth] = 0
    } else if (c === 0x7d || c === 0x5d) { // } ]
      if (depth > 0) depth--
    } else if (c === 0x2c && depth > 0) { // ,
      if (++members[depth]! >= maxMembers) {
        return { reason: "too-many-members", message: `has an object or array of more than ${maxMembers} members` }
      }
    }
  }
  return undefined
}

/**
 * Parses `text` as one JSON document (RFC 8259) nested at most `maxDepth` levels, with
 * at most `MaxJsonMembers` members in any object or array. The bounds are checked by
 * `scanShape` before the parser runs. Fails with `invalid-json` (the parser's reason, cut
 * to `MaxIssueLength`), `too-deep` or `too-many-members`.
 */
export const parseJson = (text: string, maxDepth: number = MaxJsonDepth): Either.Either<unknown, JsonRefusal> => {
  const refused = scanShape(text, maxDepth, MaxJsonMembers)
  if (refused !== undefined) return Either.left(refused)
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (error) {
    return Either.left({ reason: "invalid-json", message: truncate(`is not valid JSON: ${(error as Error).message}`) })
  }
  // The scan already bounded the depth of valid JSON; this walk is the belt to its braces.
  return depthExceeds(value, maxDepth)
    ? Either.left({ reason: "too-deep", message: `nests arrays or objects deeper than ${maxDepth} levels` })
    : Either.right(value)
}

/** Strict UTF-8, then `parseJson`: the whole way from received bytes to a JSON value. */
export const parseJsonBytes = (bytes: Uint8Array, maxDepth: number = MaxJsonDepth) =>
  Either.flatMap(decodeUtf8(bytes), (text) => parseJson(text, maxDepth))

/** `text` cut to at most `max` UTF-16 code units, ending in `…` when cut, never splitting a surrogate pair. */
export const truncate = (text: string, max: number = MaxIssueLength): string => {
  if (text.length <= max) return text
  let end = max - 1
  const last = text.charCodeAt(end - 1)
  if (last >= 0xd800 && last <= 0xdbff) end--
  return `${text.slice(0, end)}…`
}
