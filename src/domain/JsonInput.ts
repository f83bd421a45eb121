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
  readonly reason: "invalid-utf8" | "invalid-json" | "too-deep" | "too-many-members" | "duplicate-name"
  readonly message: string
}

/**
 * A JSON document as `parseJson` gives it: the parsed value, and the text of each number
 * that is a direct member of the top-level object, by member name, as it was written
 * (`{"revision":1.0}` gives `revision` → `1.0`; empty when the value is no object). The
 * decoders judge with it what parsing has erased: `1.0`, `1e0` and `1` are all the
 * number 1 (see `revisionLexemeIssue`).
 */
export interface JsonDocument {
  readonly value: unknown
  readonly numberLexemes: ReadonlyMap<string, string>
}

/** What `scanShape` found in a text within its bounds. */
export interface JsonShape {
  /** The text of each number that is a direct member of the top-level object, by member name. */
  readonly numberLexemes: ReadonlyMap<string, string>
  /** The first member name found twice in one object, compared after unescaping; `undefined` if none. */
  readonly duplicateName: string | undefined
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

const isJsonWhitespace = (c: number) => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d
// The characters a JSON number may have (RFC 8259 §6); the parser judges their order.
const isNumberCharacter = (c: number) =>
  (c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x2b || c === 0x2e ||
  c === 0x65 || c === 0x45

/**
 * The member name written between the quotes at `start - 1` and `end`, its escapes
 * decoded as the parser will; as written if they do not decode (the parser then refuses
 * the text anyway).
 */
const memberName = (text: string, start: number, end: number): string => {
  try {
    return JSON.parse(text.slice(start - 1, end + 1)) as string
  } catch {
    return text.slice(start, end)
  }
}

/**
 * One pass over JSON text, before it is parsed, that finds the deepest nesting and the
 * largest object or array, giving up at the first that passes its bound; on the way it
 * notes the first member name that appears twice in one object (at any depth, compared
 * after unescaping, so `"revision"` and `"rev\u0069sion"` are one name: I-JSON, RFC 7493
 * §2.3) and the text of each number that is a direct member of the top-level object.
 * Strings are skipped with their escapes; the text need not be valid JSON (the parser
 * judges that, and what the scan found means something only if it passes).
 *
 * Linear in the text, a few nanoseconds a character. It allocates its stack, one `Set`
 * of names per level of nesting (reused by the next object at that level, so at most
 * `maxDepth` of them), each name once (decoded with `JSON.parse` only when it has an
 * escape), and one string per top-level number.
 */
export const scanShape = (
  text: string,
  maxDepth: number,
  maxMembers: number
): Either.Either<JsonShape, JsonRefusal> => {
  // At depth d: members[d] counts the commas seen in the container open there, isObject[d]
  // says whether it is an object, names[d] holds the member names it has had.
  const members: Array<number> = []
  const isObject: Array<boolean> = []
  const names: Array<Set<string>> = []
  const numberLexemes = new Map<string, string>()
  let duplicateName: string | undefined
  let depth = 0
  // Just after an object's `{` or `,`: the next string is a member name.
  let expectingName = false
  // Just after a `:`: the next token is a member's value.
  let afterColon = false
  // The name of the member being read at depth 1, the top-level object's.
  let topLevelName = ""
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (isJsonWhitespace(c)) continue
    if (c === 0x22) {
      const start = i + 1
      let escaped = false
      for (i = start; i < text.length; i++) {
        const d = text.charCodeAt(i)
        if (d === 0x5c) { // backslash: skip the escaped character
          escaped = true
          i++
        } else if (d === 0x22) break
      }
      if (expectingName && duplicateName === undefined) {
        const name = escaped ? memberName(text, start, i) : text.slice(start, i)
        const seen = names[depth]!
        if (seen.has(name)) duplicateName = name
        seen.add(name)
        if (depth === 1) topLevelName = name
      }
      expectingName = false
      afterColon = false
    } else if (afterColon && depth === 1 && (c === 0x2d || (c >= 0x30 && c <= 0x39))) { // - 0-9
      let end = i + 1
      while (end < text.length && isNumberCharacter(text.charCodeAt(end))) end++
      numberLexemes.set(topLevelName, text.slice(i, end))
      i = end - 1
      afterColon = false
    } else {
      expectingName = false
      afterColon = false
      if (c === 0x7b || c === 0x5b) { // { [
        if (++depth > maxDepth) {
          return Either.left({ reason: "too-deep", message: `nests arrays or objects deeper than ${maxDepth} levels` })
        }
        members[depth] = 0
        isObject[depth] = c === 0x7b
        if (c === 0x7b) {
          const seen = names[depth] ??= new Set()
          if (seen.size > 0) seen.clear()
          expectingName = true
        }
      } else if (c === 0x7d || c === 0x5d) { // } ]
        if (depth > 0) depth--
      } else if (c === 0x2c && depth > 0) { // ,
        if (++members[depth]! >= maxMembers) {
          return Either.left({
            reason: "too-many-members",
            message: `has an object or array of more than ${maxMembers} members`
          })
        }
        expectingName = isObject[depth]!
      } else if (c === 0x3a) { // :
        afterColon = true
      }
    }
  }
  return Either.right({ numberLexemes, duplicateName })
}

/**
 * Parses `text` as one JSON document (RFC 8259) nested at most `maxDepth` levels, with
 * at most `MaxJsonMembers` members in any object or array, and no member name twice in
 * any object (I-JSON, RFC 7493 §2.3: `JSON.parse` would keep the last silently). The
 * bounds are checked by `scanShape` before the parser runs, the names after it. Fails
 * with `too-deep` or `too-many-members`, then `invalid-json` (the parser's reason, cut
 * to `MaxIssueLength`), then `duplicate-name` (the name, cut to 100 characters).
 */
export const parseJson = (
  text: string,
  maxDepth: number = MaxJsonDepth
): Either.Either<JsonDocument, JsonRefusal> => {
  const shape = scanShape(text, maxDepth, MaxJsonMembers)
  if (Either.isLeft(shape)) return Either.left(shape.left)
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (error) {
    return Either.left({ reason: "invalid-json", message: truncate(`is not valid JSON: ${(error as Error).message}`) })
  }
  const { duplicateName, numberLexemes } = shape.right
  if (duplicateName !== undefined) {
    return Either.left({
      reason: "duplicate-name",
      message: `has the member name ${JSON.stringify(truncate(duplicateName, 100))} twice in one object ` +
        "(I-JSON, RFC 7493 §2.3)"
    })
  }
  // The scan already bounded the depth of valid JSON; this walk is the belt to its braces.
  return depthExceeds(value, maxDepth)
    ? Either.left({ reason: "too-deep", message: `nests arrays or objects deeper than ${maxDepth} levels` })
    : Either.right({ value, numberLexemes })
}

/** Strict UTF-8, then `parseJson`: the whole way from received bytes to a JSON document. */
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
