// The shoe commitment and cut of docs/fairness.md, checked in the browser: the same encoding as
// `croupier verify` (libs/rules/src/croupier_rules/fairness.py, verify.py), checks 1-4 of §8
// (commitment, shoe, cut, cards). The settlement (check 5) needs the rules library: `croupier verify`.
// Pure: no DOM, no network; tested against docs/fairness-vectors.json (tests/browser).
import { sha256 } from "@noble/hashes/sha256";
import { bytesToHex, concatBytes, hexToBytes, utf8ToBytes } from "@noble/hashes/utils";

export const RANKS = "23456789TJQKA";
export const SUITS = "cdhs";

/** §2: the cards joined by a single comma. */
export function shoeText(shoe: readonly string[]): string {
  return shoe.join(",");
}

function ascii(text: string): Uint8Array {
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code > 127) throw new Error(`the shoe text is not ASCII at character ${i}`);
    bytes[i] = code;
  }
  return bytes;
}

/** §4: lowercase_hex(SHA-256(salt_bytes || shoe_text_ascii)). */
export function commitment(saltHex: string, shoe: readonly string[]): string {
  if (!/^([0-9a-fA-F]{2})*$/.test(saltHex)) throw new Error("the salt is not hex");
  return bytesToHex(sha256(concatBytes(hexToBytes(saltHex), ascii(shoeText(shoe)))));
}

/** §5: the string hashed for the cut; null for an empty seed (no hash). */
export function cutHashInput(commitmentHex: string, cutSeed: string): string | null {
  return cutSeed === "" ? null : `${commitmentHex}:${cutSeed}`;
}

/** §5: SHA-256(UTF-8(commitment ":" seed)) as a big-endian integer, mod the shoe size; 0 for an empty seed. */
export function cutOffset(commitmentHex: string, cutSeed: string, shoeSize: number): number {
  const input = cutHashInput(commitmentHex, cutSeed);
  if (input === null) return 0;
  if (shoeSize <= 0) throw new Error("an empty shoe cannot be cut");
  const digest = sha256(utf8ToBytes(input));
  return Number(BigInt(`0x${bytesToHex(digest)}`) % BigInt(shoeSize));
}

export function cutDigestHex(commitmentHex: string, cutSeed: string): string | null {
  const input = cutHashInput(commitmentHex, cutSeed);
  return input === null ? null : bytesToHex(sha256(utf8ToBytes(input)));
}

/** §6: dealing position p is revealed_shoe[(offset + p) mod size]. */
export function cardAt(shoe: readonly string[], offset: number, position: number): string {
  return shoe[(offset + position) % shoe.length];
}

/** §1-2: problems with a revealed shoe (malformed cards, or not exactly `decks` of each card). */
export function shoeProblems(shoe: readonly string[], decks: number): string[] {
  const problems: string[] = [];
  const counts = new Map<string, number>();
  shoe.forEach((card, position) => {
    if (card.length !== 2 || !RANKS.includes(card[0]) || !SUITS.includes(card[1])) {
      problems.push(`position ${position}: ${JSON.stringify(card)} is not a card (rank 2-9 T J Q K A, then suit c d h s)`);
      return;
    }
    counts.set(card, (counts.get(card) ?? 0) + 1);
  });
  if (shoe.length !== 52 * decks) problems.push(`the shoe holds ${shoe.length} cards, a ${decks}-deck shoe holds ${52 * decks}`);
  const wrong = [...RANKS].some((r) => [...SUITS].some((s) => (counts.get(r + s) ?? 0) !== decks));
  if (wrong && problems.length === 0) problems.push(`the shoe does not hold each card exactly ${decks} time(s)`);
  return problems;
}

// ---------------------------------------------------------------- a round, as the page received it

export interface CardLike { card: string; hand: string; faceUp: boolean; position: number }
export interface StepLike { version: bigint | number; eventType: string; payloadJson: string }
/** The fields of a RoundView (protobuf-es, camelCase) the checks read. */
export interface RoundLike {
  roundId: string;
  phase: string;
  shoeId: string;
  commitment: string;
  cutSeed: string;
  cutOffset: number;
  revealedSalt: string;
  revealedShoe: readonly string[];
  cards: readonly CardLike[];
  steps: readonly StepLike[];
}

export interface Check { name: string; passed: boolean; reason: string }
export interface Report { roundId: string; ok: boolean; checks: Check[] }

class Failed extends Error {}

interface Step { index: number; version: number; eventType: string; payload: Record<string, unknown> | Error }

function stepsOf(view: RoundLike): Step[] {
  return view.steps.map((s, index) => {
    let payload: Record<string, unknown> | Error;
    try {
      const parsed = JSON.parse(s.payloadJson || "{}");
      payload = parsed !== null && typeof parsed === "object" && !Array.isArray(parsed) ? parsed : new Error("not an object");
    } catch (e) {
      payload = e as Error;
    }
    return { index, version: Number(s.version), eventType: s.eventType, payload };
  });
}

function payload(step: Step): Record<string, unknown> {
  if (step.payload instanceof Error) throw new Failed(`step v${step.version} ${step.eventType}: its payload_json does not read as a JSON object`);
  return step.payload;
}

function one(steps: Step[], eventType: string): Step {
  const found = steps.filter((s) => s.eventType === eventType);
  if (found.length === 0) throw new Failed(`the round's steps hold no ${eventType} step`);
  if (found.length > 1) throw new Failed(`the round's steps hold ${found.length} ${eventType} steps, a round has one`);
  return found[0];
}

function int(value: unknown, fallback = 0): number {
  if (value === undefined || value === null || value === "") return fallback;
  const n = Number(value);
  if (!Number.isInteger(n)) throw new Failed(`${JSON.stringify(value)} is not a whole number`);
  return n;
}

const short = (hex: string) => (hex.length > 16 ? `${hex.slice(0, 16)}…` : hex);

function checkCommitment(view: RoundLike, steps: Step[], committedBefore?: string): string {
  const step = one(steps, "ShoeCommitted");
  const committed = String(payload(step).commitment ?? "");
  if (committedBefore !== undefined && committedBefore.trim().toLowerCase() !== committed)
    throw new Failed(`the seat showed commitment ${committedBefore.trim()} before the bets, but the round used ${committed}: the shoe was not the one committed before the cut seed`);
  const firstDeal = steps.find((s) => s.eventType === "CardsDealt");
  if (firstDeal && firstDeal.index < step.index)
    throw new Failed(`the commitment (step v${step.version}) was recorded after the first card (step v${firstDeal.version})`);
  if (view.commitment !== committed)
    throw new Failed(`the view shows commitment ${view.commitment || "(none)"}, but step v${step.version} ShoeCommitted recorded ${committed}`);
  const shoeId = String(payload(step).shoe_id ?? "");
  if (view.shoeId && view.shoeId !== shoeId)
    throw new Failed(`the view shows shoe ${view.shoeId}, but step v${step.version} ShoeCommitted recorded shoe ${shoeId}`);
  let recomputed: string;
  try {
    recomputed = commitment(view.revealedSalt, view.revealedShoe);
  } catch (e) {
    throw new Failed(`the revealed salt/shoe cannot be hashed: ${(e as Error).message}`);
  }
  if (recomputed !== committed)
    throw new Failed(`SHA-256(revealed salt ‖ revealed shoe) is ${recomputed}, but the commitment recorded before the first card is ${committed}: the revealed shoe is not the committed one`);
  const before = committedBefore !== undefined ? ", the one the seat showed before the bets" : "";
  return `SHA-256(salt ‖ shoe) = ${short(committed)}${before}, recorded at v${step.version} before the first card`;
}

function checkShoe(view: RoundLike, steps: Step[]): string {
  const table = payload(one(steps, "RoundOpened")).table as Record<string, unknown> | undefined;
  if (!table || typeof table !== "object") throw new Failed("the RoundOpened step carries no table parameters");
  const decks = int(table.decks);
  const problems = shoeProblems(view.revealedShoe, decks);
  if (problems.length) throw new Failed(`the revealed shoe is not a proper ${decks}-deck shoe: ${problems[0]}`);
  const size = int(payload(one(steps, "ShoeCommitted")).size, view.revealedShoe.length);
  if (size !== view.revealedShoe.length) throw new Failed(`the commitment recorded a ${size}-card shoe, the revealed shoe holds ${view.revealedShoe.length}`);
  return `${view.revealedShoe.length} cards, each of the 52 exactly ${decks} time(s)`;
}

function checkCut(view: RoundLike, steps: Step[], cutSeed: string): [string, number] {
  const committed = payload(one(steps, "ShoeCommitted"));
  const recordedSeed = String(committed.cut_seed ?? "");
  if (cutSeed !== recordedSeed) throw new Failed(`the player's cut seed is ${JSON.stringify(cutSeed)}, but the round recorded cut seed ${JSON.stringify(recordedSeed)}`);
  const shoe = view.revealedShoe;
  if (shoe.length === 0) throw new Failed("the revealed shoe is empty: there is nothing to cut");
  const offset = cutOffset(String(committed.commitment ?? ""), cutSeed, shoe.length);
  const recorded = int(committed.cut_offset);
  const shown = view.cutOffset;
  if (recorded !== offset || shown !== offset)
    throw new Failed(`SHA-256(commitment ":" ${JSON.stringify(cutSeed)}) mod ${shoe.length} is ${offset}, but the round ${recorded !== offset ? "recorded" : "shows"} cut offset ${recorded !== offset ? recorded : shown}`);
  const how = cutSeed ? `SHA-256(commitment ":" ${JSON.stringify(cutSeed)}) mod ${shoe.length}` : "no cut seed: the shoe starts at 0";
  return [`cut offset ${offset} = ${how}`, offset];
}

function checkCards(view: RoundLike, steps: Step[], offset: number): string {
  const cards = view.cards;
  cards.forEach((c, index) => {
    if (!c.card || c.position < 0) throw new Failed(`card #${index} (${c.hand}) is still hidden in the view`);
    if (c.position !== index)
      throw new Failed(`card #${index} ${c.card} (${c.hand}) is at position ${c.position}, but the next card of the shoe is position ${index}: a card was skipped, reordered or dealt twice`);
    const expected = index < view.revealedShoe.length ? cardAt(view.revealedShoe, offset, index) : undefined;
    if (c.card !== expected) throw new Failed(`position ${index} of the cut shoe is ${expected}, but ${c.card} (${c.hand}) was dealt`);
  });
  const recorded: [number, CardLike][] = [];
  for (const step of steps) {
    if (step.eventType !== "CardsDealt") continue;
    for (const c of (payload(step).cards as Record<string, unknown>[] | undefined) ?? []) {
      const position = c.position === undefined || c.position === null ? -1 : int(c.position);
      recorded.push([step.version, { card: String(c.card ?? ""), hand: String(c.hand ?? ""), faceUp: Boolean(c.face_up), position }]);
    }
  }
  if (recorded.length !== cards.length) throw new Failed(`the view shows ${cards.length} cards, its CardsDealt steps deal ${recorded.length}`);
  recorded.forEach(([version, r], i) => {
    const c = cards[i];
    if (r.card !== c.card || r.hand !== c.hand || r.faceUp !== c.faceUp || r.position !== c.position)
      throw new Failed(`step v${version} CardsDealt deals ${r.card} (${r.hand}) at position ${r.position}, but the view shows ${c.card} (${c.hand}) at position ${c.position}`);
  });
  return cards.length ? `all ${cards.length} dealt cards are the cut shoe at positions 0-${cards.length - 1}` : "no card was dealt";
}

function run(name: string, check: () => string): Check {
  try {
    return { name, passed: true, reason: check() };
  } catch (e) {
    if (e instanceof Failed) return { name, passed: false, reason: e.message };
    return { name, passed: false, reason: `cannot check: ${(e as Error).message}` };
  }
}

/** Checks 1-4 of docs/fairness.md §8 on a finished round; `committedBefore`: the commitment shown before the bets. */
export function verifyRound(view: RoundLike, options: { committedBefore?: string; cutSeed?: string } = {}): Report {
  if (!view.revealedSalt || view.revealedShoe.length === 0)
    return { roundId: view.roundId, ok: false, checks: [{ name: "revealed", passed: false, reason: "the shoe is not revealed yet: nothing to check" }] };
  const steps = stepsOf(view);
  const cutSeed = options.cutSeed ?? view.cutSeed;
  let offset = 0;
  const checks = [
    run("commitment", () => checkCommitment(view, steps, options.committedBefore)),
    run("shoe", () => checkShoe(view, steps)),
    run("cut", () => {
      const [reason, found] = checkCut(view, steps, cutSeed);
      offset = found;
      return reason;
    }),
  ];
  checks.push(checks[2].passed ? run("cards", () => checkCards(view, steps, offset)) : { name: "cards", passed: false, reason: "not checked: the cut did not verify" });
  return { roundId: view.roundId, ok: checks.every((c) => c.passed), checks };
}

/** A copy of the round with one thing changed, as a cheating server might show it: the verdict must fail. */
export function tampered(view: RoundLike): RoundLike {
  const shoe = [...view.revealedShoe];
  const dealt = view.cards.length;
  const a = (view.cutOffset + 0) % shoe.length;
  const b = shoe.findIndex((card, i) => i !== a && card !== shoe[a] && ((i - view.cutOffset + shoe.length) % shoe.length) >= dealt);
  if (b >= 0) [shoe[a], shoe[b]] = [shoe[b], shoe[a]];  // the first card dealt swapped with one never dealt
  return { ...view, revealedShoe: shoe };
}

// ---------------------------------------------------------------- docs/fairness-vectors.json

export interface Vector {
  name: string;
  inputs: { decks: number; salt_hex: string; revealed_shoe: string[]; cut_seed: string };
  expected: {
    shoe_size: number; shoe_text: string; commitment: string; cut_hash_input: string | null;
    cut_hash_input_utf8_hex: string | null; cut_digest: string | null; cut_offset: number;
    first_cards: { position: number; shoe_index: number; card: string }[]; last_card: { position: number; shoe_index: number; card: string };
  };
}

/** Each field of a vector recomputed from its inputs: the mismatches (empty when it passes). */
export function checkVector(v: Vector): string[] {
  const { inputs, expected } = v;
  const shoe = inputs.revealed_shoe;
  const got: Record<string, unknown> = {};
  got.shoe_size = shoe.length;
  got.shoe_text = shoeText(shoe);
  got.commitment = commitment(inputs.salt_hex, shoe);
  const input = cutHashInput(got.commitment as string, inputs.cut_seed);
  got.cut_hash_input = input;
  got.cut_hash_input_utf8_hex = input === null ? null : bytesToHex(utf8ToBytes(input));
  got.cut_digest = cutDigestHex(got.commitment as string, inputs.cut_seed);
  const offset = cutOffset(got.commitment as string, inputs.cut_seed, shoe.length);
  got.cut_offset = offset;
  const at = (position: number) => ({ position, shoe_index: (offset + position) % shoe.length, card: cardAt(shoe, offset, position) });
  got.first_cards = expected.first_cards.map((c) => at(c.position));
  got.last_card = at(expected.last_card.position);
  const problems = shoeProblems(shoe, inputs.decks);
  const mismatches = problems.map((p) => `shoe: ${p}`);
  for (const key of Object.keys(got)) {
    const want = (expected as unknown as Record<string, unknown>)[key];
    if (JSON.stringify(got[key]) !== JSON.stringify(want)) mismatches.push(`${key}: expected ${JSON.stringify(want)}, got ${JSON.stringify(got[key])}`);
  }
  return mismatches;
}
